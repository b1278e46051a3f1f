"""Parallelism on the `neuron` backend against the same job on CPU + Gloo, rank by rank (the reference workflow in
docs/support-matrix.md#distributed): DDP, FSDP2, tensor and sequence parallelism, pipeline parallelism, FSDP x TP on a
2-D mesh, a distributed checkpoint of an FSDP2 model, and compiled blocks among them. Each job trains a small model
for a few steps and returns its losses and parameters; the neuron run must match the CPU run."""
import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from distributed_launcher import run

STEPS = 3
DIM = 16


class MLP(nn.Module):
    def __init__(self, dim: int = DIM):
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 2 * dim)
        self.down = nn.Linear(2 * dim, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(self.norm(x))))


def batch(device: str, step: int, shape=(4, 8, DIM), same_on_all_ranks: bool = False):
    """Inputs and targets made on the CPU from (step, rank), so both runs see the same numbers."""
    g = torch.Generator().manual_seed(1000 * step + (0 if same_on_all_ranks else dist.get_rank()))
    return torch.randn(*shape, generator=g).to(device), torch.randn(*shape, generator=g).to(device)


def train(model: nn.Module, device: str, same_on_all_ranks: bool = False) -> list[float]:
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)  # TP mixes DTensor and plain parameters
    losses = []
    for step in range(STEPS):
        x, y = batch(device, step, same_on_all_ranks=same_on_all_ranks)
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def full_params(model: nn.Module) -> dict:
    return {n: (p.full_tensor() if hasattr(p, "full_tensor") else p).detach().float().cpu()
            for n, p in model.named_parameters()}


def seeded(factory):
    torch.manual_seed(0)
    return factory()


def assert_runs_match(results: list, atol: float = 1e-5, rtol: float = 1e-4) -> None:
    for rank, result in enumerate(results):
        got, want = result["neuron"], result["cpu"]
        torch.testing.assert_close(got["losses"], want["losses"], atol=atol, rtol=rtol,
                                   msg=lambda m: f"rank {rank} losses: {m}")
        assert got["params"].keys() == want["params"].keys()
        for name in want["params"]:
            torch.testing.assert_close(got["params"][name], want["params"][name], atol=atol, rtol=rtol,
                                       msg=lambda m: f"rank {rank} {name}: {m}")


# -- DDP --
def ddp(device: str) -> dict:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = seeded(MLP).to(device)
    wrapped = DDP(model, bucket_cap_mb=0.001)  # several buckets, so several overlapped all-reduces
    hooked_model = seeded(MLP).to(device)
    hooked = DDP(hooked_model)
    # A Python comm hook reads the collective's future and runs device ops in its callback.
    hooked.register_comm_hook(None, default_hooks.fp16_compress_hook)
    return {"losses": train(wrapped, device) + train(hooked, device),
            "params": {**full_params(model), **{f"hooked.{n}": p for n, p in full_params(hooked_model).items()}}}


def test_ddp_matches_cpu_gloo():
    assert_runs_match(run(__file__, "ddp", 2))


def compiled_ddp(device: str) -> dict:
    """DDP under torch.compile(backend="neuron"); the CPU run stays eager, as the reference."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    model = seeded(MLP).to(device)
    wrapped = DDP(model)
    compiled = torch.compile(wrapped, backend="neuron") if device == "neuron" else wrapped
    return {"losses": train(compiled, device), "params": full_params(model)}


def test_compiled_ddp_matches_eager_cpu_gloo():
    assert_runs_match(run(__file__, "compiled_ddp", 2), atol=1e-4, rtol=1e-4)


# -- FSDP2, and a distributed checkpoint of it --
def fsdp2(device: str, checkpoint_dir: str) -> dict:
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device, (dist.get_world_size(),))
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)

    def sharded():
        model = seeded(lambda: nn.Sequential(MLP(), MLP())).to(device)
        for block in model:
            fully_shard(block, mesh=mesh, mp_policy=policy, reshard_after_forward=True)
        return fully_shard(model, mesh=mesh, mp_policy=policy)

    model = sharded()
    losses = train(model, device)
    path = f"{checkpoint_dir}/{device}"
    dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=path)
    restored = sharded()  # fresh weights, then the checkpoint's
    state = {"model": get_model_state_dict(restored)}
    dcp.load(state, checkpoint_id=path)
    set_model_state_dict(restored, state["model"])
    restored_params = full_params(restored)
    return {"losses": losses, "params": full_params(model), "restored": restored_params,
            "local_device": next(model.parameters()).to_local().device.type}


def test_fsdp2_mixed_precision_and_checkpoint_match_cpu_gloo(tmp_path):
    results = run(__file__, "fsdp2", 2, kwargs={"checkpoint_dir": str(tmp_path)})
    assert_runs_match(results, atol=1e-2, rtol=1e-2)  # bf16 compute on both sides
    for result in results:
        got = result["neuron"]
        assert got["local_device"] == "neuron"
        for name, value in got["params"].items():
            assert torch.equal(got["restored"][name], value), f"checkpoint round trip changed {name}"


# -- tensor and sequence parallelism --
def tensor_parallel(device: str) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module,
    )

    mesh = init_device_mesh(device, (dist.get_world_size(),))
    tp = parallelize_module(seeded(MLP).to(device), mesh, {"up": ColwiseParallel(), "down": RowwiseParallel()})
    sp = parallelize_module(seeded(MLP).to(device), mesh, {
        "norm": SequenceParallel(),
        "up": ColwiseParallel(input_layouts=Shard(1)),
        "down": RowwiseParallel(output_layouts=Shard(1)),
    })
    # Every rank of a TP group sees the same batch; SP then shards it along the sequence.
    return {"losses": train(tp, device, same_on_all_ranks=True) + train(sp, device, same_on_all_ranks=True),
            "params": {**{f"tp.{n}": p for n, p in full_params(tp).items()},
                       **{f"sp.{n}": p for n, p in full_params(sp).items()}}}


def test_tensor_and_sequence_parallel_match_cpu_gloo():
    assert_runs_match(run(__file__, "tensor_parallel", 2))


# -- pipeline parallelism --
def pipeline(device: str) -> dict:
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

    rank, world = dist.get_rank(), dist.get_world_size()
    losses, params = [], {}
    for name, schedule_class in (("gpipe", ScheduleGPipe), ("1f1b", Schedule1F1B)):
        blocks = seeded(lambda: nn.Sequential(*[MLP() for _ in range(world)]))
        stage_module = blocks[rank].to(device)
        stage = PipelineStage(stage_module, rank, world, torch.device(device))
        schedule = schedule_class(stage, n_microbatches=2, loss_fn=F.mse_loss)
        opt = torch.optim.SGD(stage_module.parameters(), lr=0.1)
        for step in range(STEPS):
            x, y = batch(device, step, same_on_all_ranks=True)
            step_losses = []
            if rank == 0:
                schedule.step(x)
            elif rank == world - 1:
                schedule.step(target=y, losses=step_losses)
            else:
                schedule.step()
            opt.step()
            opt.zero_grad()
            losses += [loss.item() for loss in step_losses]
        params.update({f"{name}.{n}": p for n, p in full_params(stage_module).items()})
    return {"losses": losses, "params": params}


def test_pipeline_gpipe_and_1f1b_match_cpu_gloo():
    assert_runs_match(run(__file__, "pipeline", 2))


# -- FSDP x TP on a 2-D mesh --
def fsdp_tp(device: str, compiled: bool = False) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    mesh = init_device_mesh(device, (2, dist.get_world_size() // 2), mesh_dim_names=("dp", "tp"))
    model = seeded(MLP).to(device)
    parallelize_module(model, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
    if compiled:  # TorchTitan's order: tensor parallel, compile each block, then FSDP
        model.compile(backend="neuron", fullgraph=True)
    fully_shard(model, mesh=mesh["dp"])
    # Ranks of one TP group share a batch; the two DP replicas see different ones.
    dp_rank = mesh.get_local_rank("dp")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    losses = []
    for step in range(STEPS):
        g = torch.Generator().manual_seed(1000 * step + dp_rank)
        x, y = (torch.randn(4, 8, DIM, generator=g).to(device) for _ in range(2))
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return {"losses": losses, "params": full_params(model)}


def fsdp_tp_compiled(device: str) -> dict:
    """The neuron run compiled with backend neuron; the CPU reference stays eager."""
    return fsdp_tp(device, compiled=device == "neuron")


def test_fsdp_x_tp_2d_mesh_matches_cpu_gloo():
    assert_runs_match(run(__file__, "fsdp_tp", 4, timeout=180))


def test_compiled_fsdp_x_tp_2d_mesh_matches_eager_cpu_gloo():
    assert_runs_match(run(__file__, "fsdp_tp_compiled", 4, timeout=300), atol=1e-4, rtol=1e-4)


# -- a compiled sequence-parallel block fed by a collective still in flight --
def sequence_parallel_compiled(device: str) -> dict:
    """TorchTitan's first block: an eager row-parallel layer (its embedding) hands the block its output
    while the reduce-scatter into sequence shards is still running (ParallelStyle redistributes with
    async_op=True), and the compiled block waits for it inside its graph. Rank 1 starts every step late,
    so rank 0's block starts before that transfer has filled its input. The CPU reference stays eager."""
    import time

    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel, RowwiseParallel, SequenceParallel, parallelize_module,
    )

    rank, world = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh(device, (world,))
    model = seeded(lambda: nn.Sequential(nn.Linear(DIM, DIM), MLP())).to(device)
    parallelize_module(model, mesh, {
        "0": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1), use_local_output=False),
        "1.norm": SequenceParallel(),
        "1.up": ColwiseParallel(input_layouts=Shard(1)),
        "1.down": RowwiseParallel(output_layouts=Shard(1), use_local_output=False),
    })
    if device == "neuron":
        model[1].compile(backend="neuron", fullgraph=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, foreach=False)
    losses = []
    for step in range(STEPS):
        x, y = batch(device, step, same_on_all_ranks=True)
        if rank == 1:
            time.sleep(0.5)
        out = model(x).to_local()  # this rank's sequence shard
        loss = F.mse_loss(out, y.chunk(world, dim=1)[rank])
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return {"losses": losses, "params": full_params(model)}


def test_compiled_sequence_parallel_block_waits_for_its_input_in_flight():
    assert_runs_match(run(__file__, "sequence_parallel_compiled", 2, timeout=300), atol=1e-4, rtol=1e-4)
