"""A DDP training step on the `neuron` backend against the same step on CPU + Gloo (issue 4: within
1.15x), 2 ranks on loopback.

    python benchmarks/distributed_ddp_step.py [--width 1024] [--layers 4] [--batch 64] [--steps 20]

Both models live in the same processes and their steps alternate (taking turns at going first), so
load from other work on a shared machine hits both alike. Reports the best and the median step time
of each, and their ratios.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from distributed_launch import under_torchrun


def model(width: int, layers: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(width, width), nn.GELU())])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()

    dist.init_process_group("neuron")
    gloo = dist.new_group(backend="gloo")
    runs = {}
    for device, group in (("cpu", gloo), ("neuron", None)):
        ddp = DDP(model(args.width, args.layers).to(device), process_group=group)
        opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
        x, y = (torch.randn(args.batch, args.width).to(device) for _ in range(2))

        def step(ddp=ddp, opt=opt, x=x, y=y):
            F.mse_loss(ddp(x), y).backward()
            opt.step()
            opt.zero_grad()
            return ddp.module[0].weight[0, 0].item()  # waits for the step, as reading a loss would

        runs[device] = (step, [])
    for _ in range(3):
        for step, _ in runs.values():
            step()
    for i in range(args.steps):
        for device in ("cpu", "neuron") if i % 2 == 0 else ("neuron", "cpu"):  # neither always goes first
            step, times = runs[device]
            dist.barrier()
            start = time.perf_counter()
            step()
            times.append(time.perf_counter() - start)
    if dist.get_rank() == 0:
        params = sum(p.numel() for p in model(args.width, args.layers).parameters())
        cpu, neuron = runs["cpu"][1], runs["neuron"][1]
        print(f"DDP step, 2 ranks, {params / 1e6:.1f} M parameters, batch {args.batch}, {args.steps} steps")
        for name, summary in (("best", min), ("median", statistics.median)):
            c, n = summary(cpu), summary(neuron)
            print(f"{name:>6}: cpu+gloo {c * 1e3:8.2f} ms   neuron {n * 1e3:8.2f} ms   ratio {n / c:.3f}")
    dist.destroy_process_group()


if __name__ == "__main__" and under_torchrun(__file__):
    main()
