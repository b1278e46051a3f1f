"""Shared by the NKI examples: compare a kernel's output with PyTorch and print its estimate."""
import numpy as np
import torch

import nki


def report_and_check(name, kernel, args, expected, atol, rtol, **constants):
    """Run `kernel` on `args` (numpy), compare with `expected` (torch), print latency and bottleneck."""
    report = nki.benchmark(kernel)(*args, **constants)
    got = torch.from_numpy(np.asarray(report.outputs, dtype=np.float32))
    torch.testing.assert_close(got, expected.float(), atol=atol, rtol=rtol)
    print(f"{name}: matches PyTorch; estimated {report.latency_us:.2f} us on {report.target}, "
          f"bottleneck {report.bottleneck}")
    return report
