"""FSDP2 x tensor parallelism on a 2-D DeviceMesh of the `neuron` backend, with a distributed checkpoint.

    torchrun --nproc_per_node 4 examples/distributed/fsdp_tp_train.py [--checkpoint /tmp/fsdp_tp_ckpt]

The mesh is (dp=2, tp=2): each MLP's up projection is split by columns and its down projection by rows
across the TP pair; FSDP2 shards the result across the DP pair, gathering parameters in bf16
(MixedPrecisionPolicy) and resharding after forward. The same script runs on CPU + Gloo with
`--device cpu`, for comparison.

At full size, the way a model too large for one host is built: `--init-on-meta` makes it on the meta
device and materialises each shard on the device. A 70B-class stack of MLPs on 256 NeuronCores, sized
without the hardware:

    localneuron estimate --target trn1 --nodes 8 --script examples/distributed/fsdp_tp_train.py \
        --dim 8192 --layers 130 --tp 8 --batch 1 --seq 4096 --init-on-meta --steps 3
"""
import argparse
import os

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.checkpoint.state_dict import get_model_state_dict
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module


class MLP(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.up, self.down = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="neuron")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--checkpoint", default=None)
    parser.add_argument("--dim", type=int, default=64, help="model width (each MLP is dim -> 4 dim -> dim)")
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--tp", type=int, help="tensor-parallel degree (default: half the ranks; dp the rest)")
    parser.add_argument("--batch", type=int, default=8, help="sequences per DP replica and step")
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--init-on-meta", action="store_true",
                        help="build on the meta device, then materialise the shards on the device")
    args = parser.parse_args()

    world = int(os.environ["WORLD_SIZE"])
    tp = args.tp or world // 2
    # init_device_mesh initialises the default process group itself: "neuron" for the neuron device.
    mesh = init_device_mesh(args.device, (world // tp, tp), mesh_dim_names=("dp", "tp"))
    torch.manual_seed(0)
    with torch.device("meta" if args.init_on_meta else "cpu"):
        model = nn.Sequential(*(MLP(args.dim) for _ in range(args.layers)))
    if not args.init_on_meta:
        model = model.to(args.device)
    for block in model:
        parallelize_module(block, mesh["tp"], {"up": ColwiseParallel(), "down": RowwiseParallel()})
        fully_shard(block, mesh=mesh["dp"], mp_policy=MixedPrecisionPolicy(param_dtype=torch.bfloat16))
    fully_shard(model, mesh=mesh["dp"])
    if args.init_on_meta:
        model.to_empty(device=args.device)
        for block in model:
            block.up.reset_parameters()
            block.down.reset_parameters()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)

    dp_rank = mesh.get_local_rank("dp")
    for step in range(args.steps):
        g = torch.Generator().manual_seed(100 * step + dp_rank)  # one batch per DP replica
        x, y = (torch.randn(args.batch, args.seq, args.dim, generator=g).to(args.device) for _ in range(2))
        loss = F.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad()
        if dist.get_rank() == 0:
            print(f"step {step} loss {loss.item():.6f}", flush=True)
    if args.checkpoint:
        dcp.save({"model": get_model_state_dict(model)}, checkpoint_id=args.checkpoint)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
