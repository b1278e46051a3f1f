"""Collectives refuse what the transport would mishandle, before it reaches the transport: strided
operands it reads as flat memory, dtype mismatches within a call, and (TORCH_DISTRIBUTED_DEBUG=DETAIL)
shapes that differ across ranks, which otherwise abort the process inside Gloo."""
import torch
import torch.distributed as dist

from distributed_launcher import run

NEURON_ONLY = (("neuron", "neuron"),)


def refusals(device: str) -> dict:
    rank = dist.get_rank()
    grid = torch.arange(8.0, device=device).reshape(4, 2) * (rank + 1)
    cases = {
        "strided all_reduce": lambda: dist.all_reduce(grid[:, 1]),
        "strided broadcast": lambda: dist.broadcast(grid[:, 1], src=0),
        "strided all_gather input": lambda: dist.all_gather([torch.zeros(4, device=device)] * 2, grid[:, 0]),
        "dtype all_gather_into_tensor": lambda: dist.all_gather_into_tensor(
            torch.zeros(16, device=device, dtype=torch.float16), grid.flatten()),
        "dtype all_gather list": lambda: dist.all_gather(
            [torch.zeros(8, device=device, dtype=torch.int32) for _ in range(2)], grid.flatten()),
        "dtype reduce_scatter_tensor": lambda: dist.reduce_scatter_tensor(
            torch.zeros(4, device=device, dtype=torch.bfloat16), grid.flatten()),
    }
    out = {}
    for name, call in cases.items():
        try:
            call()
            out[name] = None
        except ValueError as error:
            out[name] = str(error)
    # What stays allowed: strided per-rank lists c10d copies, and coalesced pairs of different dtypes.
    gathered = torch.zeros(4, 2, device=device)
    dist.all_gather([gathered[:, 0], gathered[:, 1]], torch.full((4,), rank + 1.0, device=device))
    out["strided all_gather outputs"] = gathered.cpu()
    floats, ints = torch.zeros(4, device=device), torch.zeros(4, device=device, dtype=torch.int32)
    with dist._coalescing_manager(device=torch.device(device)):
        dist.all_gather_into_tensor(floats, torch.full((2,), rank + 1.0, device=device))
        dist.all_gather_into_tensor(ints, torch.full((2,), rank + 1, device=device, dtype=torch.int32))
    out["coalesced pairs"] = (floats.cpu(), ints.cpu())
    out["group still usable"] = _sum_of_ranks(device)
    return out


def _sum_of_ranks(device: str) -> float:
    t = torch.full((3,), float(dist.get_rank()), device=device)
    dist.all_reduce(t)
    return t[0].item()


def test_strided_operands_and_dtype_mismatches_are_refused_before_the_transport():
    for result in run(__file__, "refusals", 2, backends=NEURON_ONLY):
        out = result["neuron"]
        for name in ("strided all_reduce", "strided broadcast", "strided all_gather input"):
            assert "Tensors must be contiguous (got a float32[4] view with strides (2,))" in out[name], (name, out[name])
        assert out["dtype all_gather_into_tensor"] == (
            "all_gather_into_tensor: the tensors of one collective must share one dtype, got float16, float32; "
            "convert them with .to(dtype) first.")
        assert "Invalid usage of tensors with different dtypes" in out["dtype all_gather list"]  # torch's own check
        assert "must share one dtype, got bfloat16, float32" in out["dtype reduce_scatter_tensor"]
        assert torch.equal(out["strided all_gather outputs"], torch.tensor([[1.0, 2.0]] * 4))
        floats, ints = out["coalesced pairs"]
        assert torch.equal(floats, torch.tensor([1.0, 1.0, 2.0, 2.0])) and torch.equal(ints, torch.tensor([1, 1, 2, 2], dtype=torch.int32))
        assert out["group still usable"] == 1.0


def shape_mismatch(device: str) -> dict:
    rank = dist.get_rank()
    out = {}
    try:
        dist.all_reduce(torch.ones(4 + rank, device=device))  # without the check Gloo aborts the process
        out["mismatch"] = None
    except ValueError as error:
        out["mismatch"] = str(error)
    try:
        dist.all_gather_into_tensor(torch.zeros(8, device=device), torch.ones(4, device=device))
        out["matching"] = "ok"
    except ValueError as error:
        out["matching"] = str(error)
    out["group still usable"] = _sum_of_ranks(device)
    return out


def test_detail_debug_mode_turns_a_cross_rank_shape_mismatch_into_an_error_on_every_rank():
    results = run(__file__, "shape_mismatch", 2, backends=NEURON_ONLY, env={"TORCH_DISTRIBUTED_DEBUG": "DETAIL"})
    for rank, result in enumerate(results):
        out = result["neuron"]
        other = 1 - rank
        assert f"(rank {rank} of 2): all_reduce was called with different shapes or dtypes on ranks [{other}]" in out["mismatch"]
        assert f"this rank (all_reduce: float32[{4 + rank}])" in out["mismatch"]
        assert out["matching"] == "ok" and out["group still usable"] == 1.0
