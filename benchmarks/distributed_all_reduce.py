"""all_reduce bus bandwidth of the `neuron` backend against Gloo on CPU tensors of the same size (issue 4:
at least 0.9x from 1 MiB to 256 MiB), 2 ranks on loopback.

    python benchmarks/distributed_all_reduce.py [--sizes-mib 1 16 256] [--seconds 3]

Both groups live in the same processes and their calls alternate, so load from other work on a shared
machine hits both alike. Each size runs for about --seconds per path (small sizes get many iterations)
and reports the best and the median: on a loaded machine the best is the steadier measure of what
each path costs. Bus bandwidth follows nccl-tests:
bytes * 2(n-1)/n / time.
"""
import argparse
import statistics
import time

import torch
import torch.distributed as dist

from distributed_launch import under_torchrun


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes-mib", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()

    dist.init_process_group("neuron")
    gloo = dist.new_group(backend="gloo")
    world = dist.get_world_size()
    factor = 2 * (world - 1) / world
    rows = []
    for mib in args.sizes_mib:
        numel = (mib << 20) // 4
        host, device = torch.ones(numel), torch.ones(numel, device="neuron")
        warmup = timed(lambda: dist.all_reduce(host, group=gloo)) + timed(lambda: dist.all_reduce(device))
        iters = torch.tensor(max(5, int(args.seconds / warmup)))
        dist.all_reduce(iters, op=dist.ReduceOp.MIN, group=gloo)  # every rank runs the same count
        times = {"gloo": [], "neuron": []}
        calls = {"gloo": lambda: dist.all_reduce(host, group=gloo), "neuron": lambda: dist.all_reduce(device)}
        for i in range(int(iters)):
            for path in ("gloo", "neuron") if i % 2 == 0 else ("neuron", "gloo"):  # neither always goes first
                dist.barrier()
                times[path].append(timed(calls[path]))
        rows.append((mib, int(iters), *(factor * (mib << 20) / summary(times[k]) / 1e9
                             for summary in (min, statistics.median) for k in ("gloo", "neuron"))))
    if dist.get_rank() == 0:
        print(f"all_reduce, {world} ranks, bus bandwidth in GB/s")
        print(f"{'size':>9} {'iters':>6} | {'best: gloo cpu':>14} {'neuron':>7} {'ratio':>6} | "
              f"{'median: gloo cpu':>16} {'neuron':>7} {'ratio':>6}")
        for mib, iters, best_g, best_n, med_g, med_n in rows:
            print(f"{mib:>5} MiB {iters:>6} | {best_g:>14.3f} {best_n:>7.3f} {best_n / best_g:>6.2f} | {med_g:>16.3f} "
                  f"{med_n:>7.3f} {med_n / med_g:>6.2f}")
    dist.destroy_process_group()


if __name__ == "__main__" and under_torchrun(__file__):
    main()
