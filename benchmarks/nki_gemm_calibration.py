"""Calibrate the NKI cycle model against the published Trn1 BF16 GEMM.

The NKI matrix-multiplication tutorial measured [4096, 8192] @ [8192, 8192] in BF16 on one
NeuronCore-v2: 51.80 ms for the original tiled kernel and 6.97 ms (85.24% of peak) for the
fully blocked one. This script costs the equivalent kernels from examples/nki/matmul.py in a
timing-only run (shapes only, no arithmetic) on gen2 and prints both estimates.
"""
import os
import sys
import time
from pathlib import Path

os.environ["NEURON_PLATFORM_TARGET_OVERRIDE"] = "gen2"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples" / "nki"))

import nki  # noqa: E402
from matmul import matmul_blocked, matmul_naive  # noqa: E402

PUBLISHED_MS = {"matmul_blocked": 6.97, "matmul_naive": 51.80}
M, K, N = 4096, 8192, 8192
PEAK_FLOPS = 2 * 128 * 128 * 2.8e9   # 128x128 PEs, 2 FLOP each, 2.8 GHz


def main():
    args = (nki.ShapeOnly((K, M), "bfloat16"), nki.ShapeOnly((K, N), "bfloat16"))
    estimates = {}
    for kernel in (matmul_blocked, matmul_naive):
        started = time.perf_counter()
        report = nki.benchmark(kernel, numerics=False)(*args)
        name = kernel.__name__
        estimates[name] = report.latency_ms
        utilisation = 2 * M * K * N / (report.latency_ns * 1e-9) / PEAK_FLOPS
        print(f"{name:15s} estimated {report.latency_ms:6.2f} ms (published {PUBLISHED_MS[name]:5.2f} ms, "
              f"{100 * (report.latency_ms / PUBLISHED_MS[name] - 1):+.0f}%), "
              f"{100 * utilisation:.0f}% of TensorE peak, bottleneck {report.bottleneck}, "
              f"costed in {time.perf_counter() - started:.1f} s")
    ratio = estimates["matmul_naive"] / estimates["matmul_blocked"]
    published = PUBLISHED_MS["matmul_naive"] / PUBLISHED_MS["matmul_blocked"]
    print(f"naive / blocked: {ratio:.1f}x (published {published:.1f}x)")


if __name__ == "__main__":
    main()
