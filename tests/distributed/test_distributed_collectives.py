"""Every collective of the `neuron` backend against the same call on CPU + Gloo (docs/support-matrix.md#distributed),
on 2 real processes; then the coalesced and functional variants, and the documented refusals."""
from contextlib import nullcontext

import pytest
import torch
import torch.distributed as dist
import torch.distributed._functional_collectives as funcol
from torch.distributed.distributed_c10d import _coalescing_manager

from distributed_launcher import run

ALL_OPS = ("SUM", "PRODUCT", "MIN", "MAX", "AVG", "BAND", "BOR", "BXOR")
DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int64, torch.uint8, torch.bool)


def valid(op: str, dtype: torch.dtype) -> bool:
    if op == "AVG":
        return dtype.is_floating_point
    if op in ("BAND", "BOR", "BXOR"):
        return not dtype.is_floating_point
    return dtype != torch.bool or op in ("MIN", "MAX")


def rank_tensor(device: str, *shape: int, dtype=torch.float32, offset: int = 0) -> torch.Tensor:
    """Different, exactly representable values on each rank (small integers)."""
    rank = dist.get_rank()
    values = (torch.arange(torch.Size(shape).numel()) * (rank + 2) + offset + rank) % 7 + 1
    if dtype == torch.bool:
        values = values % 2 == 0
    return values.reshape(shape).to(dtype).to(device)


def cpu(x):
    return [cpu(y) for y in x] if isinstance(x, (list, tuple)) else x.cpu()


def collectives(device: str) -> dict:
    rank, world = dist.get_rank(), dist.get_world_size()
    out = {}
    for op in ALL_OPS:
        for dtype in DTYPES:
            if valid(op, dtype):
                t = rank_tensor(device, 5, dtype=dtype)
                dist.all_reduce(t, op=getattr(dist.ReduceOp, op))
                out[f"all_reduce/{op}/{dtype}"] = t
    x = rank_tensor(device, 3)
    gathered = [torch.empty(3, device=device) for _ in range(world)]
    dist.all_gather(gathered, x)
    out["all_gather"] = gathered
    flat = torch.empty(3 * world, device=device)
    dist.all_gather_into_tensor(flat, x)
    out["all_gather_into_tensor"] = flat
    rs = torch.empty(3, device=device)
    dist.reduce_scatter(rs, [rank_tensor(device, 3, offset=i) for i in range(world)])
    out["reduce_scatter"] = rs
    for op in ("SUM", "AVG", "MAX"):
        rst = torch.empty(2, device=device)
        dist.reduce_scatter_tensor(rst, rank_tensor(device, 2 * world), op=getattr(dist.ReduceOp, op))
        out[f"reduce_scatter_tensor/{op}"] = rst
    b = rank_tensor(device, 4)
    dist.broadcast(b, src=1)
    out["broadcast"] = b
    r = rank_tensor(device, 4)
    dist.reduce(r, dst=0)
    out["reduce"] = r if rank == 0 else None  # non-destination buffers are scratch
    g = [torch.empty(2, device=device) for _ in range(world)] if rank == 0 else None
    dist.gather(rank_tensor(device, 2), g, dst=0)
    out["gather"] = g
    s = torch.empty(2, device=device)
    dist.scatter(s, [rank_tensor(device, 2, offset=i) for i in range(world)] if rank == 0 else None, src=0)
    out["scatter"] = s
    a2a = [torch.empty(2, device=device) for _ in range(world)]
    dist.all_to_all(a2a, [rank_tensor(device, 2, offset=i) for i in range(world)])
    out["all_to_all"] = a2a
    a2as = torch.empty(2 * world, device=device)
    dist.all_to_all_single(a2as, rank_tensor(device, 2 * world))
    out["all_to_all_single"] = a2as
    peer = (rank + 1) % world
    sent, received = rank_tensor(device, 3), torch.empty(3, device=device)
    works = dist.batch_isend_irecv([dist.P2POp(dist.isend, sent, peer), dist.P2POp(dist.irecv, received, peer)])
    for w in works:
        w.wait()
    out["isend_irecv"] = received
    if rank == 0:
        dist.send(rank_tensor(device, 2), 1)
    elif rank == 1:
        p2p = torch.empty(2, device=device)
        dist.recv(p2p, 0)
        out["send_recv"] = p2p
    work = dist.all_reduce(t := rank_tensor(device, 4), async_op=True)
    value = work.get_future().wait()
    work.wait()
    out["async_all_reduce"] = t
    out["async_future_on_device"] = value[0].device.type == device  # a CPU alias would fail this on neuron
    out["async_completed"] = work.is_completed()
    dist.barrier()
    objects = [None] * world
    dist.all_gather_object(objects, {"rank": rank})
    out["all_gather_object"] = objects
    coalesced = [rank_tensor(device, 3), rank_tensor(device, 2, dtype=torch.float32, offset=1)]
    dist.all_reduce_coalesced(coalesced)
    out["all_reduce_coalesced"] = coalesced
    gathered_coalesced = [[torch.empty(2, device=device) for _ in range(2)] for _ in range(world)]
    dist.all_gather_coalesced(gathered_coalesced, [rank_tensor(device, 2), rank_tensor(device, 2, offset=3)])
    out["all_gather_coalesced"] = gathered_coalesced
    coalesce_on = torch.device(device) if device == "neuron" else None  # Gloo has no startCoalescing
    with _coalescing_manager(device=coalesce_on, async_ops=True) as cm:
        managed = [rank_tensor(device, 4), rank_tensor(device, 3, offset=2)]
        for t in managed:
            dist.all_reduce(t)
    cm.wait()
    out["coalescing_manager/all_reduce"] = managed
    # PREMUL_SUM (FSDP2 with a gradient divide factor) has no Gloo twin: the CPU run scales by hand.
    scaled, rs_scaled = rank_tensor(device, 4), torch.empty(2, device=device)
    if device == "neuron":
        dist.all_reduce(scaled, op=dist._make_nccl_premul_sum(0.5))
        dist.reduce_scatter_tensor(rs_scaled, rank_tensor(device, 2 * world), op=dist._make_nccl_premul_sum(0.5))
    else:
        dist.all_reduce(scaled.mul_(0.5))
        dist.reduce_scatter_tensor(rs_scaled, rank_tensor(device, 2 * world) * 0.5)
    out["premul_sum"] = (scaled, rs_scaled)
    return _to_cpu(out)


def coalesced_tensor_ops(device: str) -> dict:
    """all_gather_into_tensor / reduce_scatter_tensor under _coalescing_manager, which Gloo cannot coalesce:
    compared with the same calls made one by one."""
    world = dist.get_world_size()
    inputs = [rank_tensor(device, 2), rank_tensor(device, 3, offset=1)]
    big_inputs = [rank_tensor(device, 2 * world), rank_tensor(device, 3 * world, offset=1)]
    results = {}
    for mode in ("coalesced", "one_by_one"):
        gathered = [torch.empty(world * x.numel(), device=device) for x in inputs]
        scattered = [torch.empty(x.numel() // world, device=device) for x in big_inputs]
        with _coalescing_manager(device=torch.device(device)) if mode == "coalesced" else nullcontext():
            for out, x in zip(gathered, inputs):
                dist.all_gather_into_tensor(out, x)
        with _coalescing_manager(device=torch.device(device)) if mode == "coalesced" else nullcontext():
            for out, x in zip(scattered, big_inputs):
                dist.reduce_scatter_tensor(out, x)
        results[mode] = _to_cpu(gathered + scattered)
    return results


def functional(device: str) -> dict:
    group = dist.group.WORLD
    x = rank_tensor(device, 4)

    def issue_all(x):
        return (funcol.all_reduce(x, "sum", group), funcol.all_gather_tensor(x, 0, group),
                funcol.reduce_scatter_tensor(x, "sum", 0, group), funcol.all_to_all_single(x, None, None, group),
                funcol.broadcast(x, 0, group), funcol.all_reduce(x * 2, "avg", group))

    eager = [y.wait() if hasattr(y, "wait") else y for y in issue_all(x)]
    out = {"eager": eager}
    if device == "neuron":
        compiled = torch.compile(issue_all, backend="neuron")(x)
        out["compiled"] = list(compiled)
        out["devices"] = {y.device.type for y in compiled}
    return _to_cpu(out)


def transfers(device: str) -> dict:
    """Host<->device bytes copied while collectives and a DDP step run on device tensors."""
    from localneuron import _C
    from torch.nn.parallel import DistributedDataParallel as DDP

    world = dist.get_world_size()
    x, out = torch.ones(1 << 16, device=device), torch.empty(world << 16, device=device)
    model = DDP(torch.nn.Linear(256, 256).to(device))
    inputs = torch.ones(8, 256, device=device)
    model(inputs).sum().backward()  # DDP's first step rebuilds its buckets; measure the next ones
    _C.reset_transfer_counters()
    dist.all_reduce(x)
    dist.all_gather_into_tensor(out, x)
    dist.reduce_scatter_tensor(x, out)
    dist.broadcast(x, 0)
    collectives = _C.transfer_counters()
    _C.reset_transfer_counters()
    for _ in range(2):
        model(inputs).sum().backward()
    return {"collectives": collectives, "ddp": _C.transfer_counters()}


def _to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.cpu()
    if isinstance(x, dict):
        return {k: _to_cpu(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return type(x)(_to_cpu(v) for v in x)
    return x


@pytest.fixture(scope="module")
def collective_results():
    return run(__file__, "collectives", 2)


def test_every_collective_matches_gloo_on_cpu(collective_results):
    for rank, result in enumerate(collective_results):
        got, want = result["neuron"], result["cpu"]
        assert got.keys() == want.keys()
        for name in want:
            assert _same(got[name], want[name]), f"rank {rank}: {name}: neuron {got[name]} != gloo {want[name]}"


def test_coalesced_tensor_collectives_match_one_by_one():
    for rank, result in enumerate(run(__file__, "coalesced_tensor_ops", 2, backends=(("neuron", "neuron"),))):
        got = result["neuron"]
        assert _same(got["coalesced"], got["one_by_one"]), f"rank {rank}"


def test_async_work_future_holds_device_tensors(collective_results):
    for result in collective_results:
        assert result["neuron"]["async_future_on_device"] and result["neuron"]["async_completed"]


def test_functional_collectives_eager_and_compiled():
    for rank, result in enumerate(run(__file__, "functional", 2)):
        got, want = result["neuron"], result["cpu"]
        assert _same(got["eager"], want["eager"]), f"rank {rank}: eager functional collectives differ from gloo"
        assert _same(got["compiled"], want["eager"]), f"rank {rank}: compiled functional collectives differ"
        assert got["devices"] == {"neuron"}


def test_collectives_and_ddp_move_device_memory_without_copies():
    for result in run(__file__, "transfers", 2, backends=(("neuron", "neuron"),)):
        collectives, ddp = result["neuron"]["collectives"], result["neuron"]["ddp"]
        assert collectives["host_to_device_bytes"] == 0 and collectives["device_to_host_bytes"] == 0, collectives
        # DDP moves a few bytes of bookkeeping; 2 steps of 256 KiB gradients must not cross.
        assert ddp["host_to_device_bytes"] < 1024 and ddp["device_to_host_bytes"] < 1024, ddp


def _same(a, b) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b
