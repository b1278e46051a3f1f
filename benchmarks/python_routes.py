"""Per-call cost of the executor's Python routes (localneuron/ops/policy.py run_python): CPU fallbacks and
float64 computed in float32, against eager CPU and against the work the route cannot avoid, done by hand on
the same tensors (the host copies in and out and the host kernel; for float64, the narrowing copies and the
op). The gap between the route and that floor is its bookkeeping: argument walks, schema facts, write-back,
call-site records. eager_overhead.py shows what it adds up to in a training step (select_backward is the
small GPT step's CPU fallback); this shows where a call's time goes.

Run by hand: `python benchmarks/python_routes.py`. Cases run round robin in one process, each figure the
best of its repeats, in processor time (this process, all threads) and wall time, with the load average.
"""
import argparse
import os
import time
import warnings

import torch

import localneuron  # noqa: F401  (the device)


def cases() -> dict:
    """name -> {"cpu": fn, "neuron": fn, "floor": fn}"""
    select_backward = torch.ops.aten.select_backward.default
    g_cpu = torch.randn(8, 32, 128)
    g = g_cpu.neuron()
    device = g.device
    x_cpu, x = torch.empty(8, 32, 128), torch.empty(8, 32, 128, device="neuron")
    m_cpu = torch.randn(16, 16)
    m = m_cpu.neuron()
    a_cpu, b_cpu = torch.randn(16, 16, dtype=torch.float64), torch.randn(16, 16, dtype=torch.float64)
    a, b = a_cpu.neuron(), b_cpu.neuron()

    def uniform_floor():
        host = x.cpu().uniform_()
        x.copy_(host)

    def qr_floor():
        q, r = torch.linalg.qr(m.cpu())
        return q.to(device), r.to(device)

    return {
        "select_backward (8,32,128)": {"cpu": lambda: select_backward(g_cpu, [3, 8, 32, 128], 0, 1),
                                       "neuron": lambda: select_backward(g, [3, 8, 32, 128], 0, 1),
                                       "floor": lambda: select_backward(g.cpu(), [3, 8, 32, 128], 0, 1).to(device)},
        "uniform_ (8,32,128)": {"cpu": lambda: x_cpu.uniform_(), "neuron": lambda: x.uniform_(),
                                "floor": uniform_floor},
        "linalg.qr (16,16)": {"cpu": lambda: torch.linalg.qr(m_cpu), "neuron": lambda: torch.linalg.qr(m),
                              "floor": qr_floor},
        "add float64 (16,16)": {"cpu": lambda: a_cpu + b_cpu, "neuron": lambda: a + b,
                                "floor": lambda: (a.float() + b.float()).double()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--number", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the machine is shared; one thread keeps the ratios stable
    warnings.simplefilter("ignore")  # the fallback and 64-bit warnings, once each
    table = cases()
    variants = ("cpu", "neuron", "floor")
    for fns in table.values():
        for fn in fns.values():
            for _ in range(500):  # the first calls compile and warm the caches
                fn()
    best = {(name, v): (float("inf"), float("inf")) for name in table for v in variants}
    for _ in range(args.repeat):
        for name, fns in table.items():
            for v in variants:
                start, start_cpu = time.perf_counter(), time.process_time()
                for _ in range(args.number):
                    fns[v]()
                torch.neuron.synchronize()
                wall = (time.perf_counter() - start) / args.number
                processor = (time.process_time() - start_cpu) / args.number
                best[name, v] = tuple(map(min, best[name, v], (wall, processor)))
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("Per call, best of repeats, microseconds: processor time (wall time); "
          "floor = the copies and host kernel by hand")
    print(f"{'case':<28} {'cpu':>15} {'neuron':>15} {'floor':>15} {'neuron - floor':>15}")
    for name in table:
        wall = {v: best[name, v][0] * 1e6 for v in variants}
        processor = {v: best[name, v][1] * 1e6 for v in variants}
        print(f"{name:<28} " + " ".join(f"{processor[v]:7.1f} ({wall[v]:5.1f})" for v in variants)
              + f" {processor['neuron'] - processor['floor']:7.1f} ({wall['neuron'] - wall['floor']:5.1f})")


if __name__ == "__main__":
    main()
