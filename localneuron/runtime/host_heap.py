"""The host heap, kept for reuse as a device's caching allocator keeps its memory.

The device's memory lives in the host heap: host kernels allocate their results with malloc, and the
device adopts them. Many of those results are allocated on the autograd engine's device thread, which
glibc serves from an arena of its own, and freed later by the Python thread. glibc gives the top of such
an arena back to the kernel once it exceeds its trim threshold, and serves large requests by mmap, so the
next step faults the same pages in again: an HF Llama training step (4 layers, 256 wide) faulted in 24 MB
per step more than on the CPU device and took 1.23x the CPU's time, 1.06x without (benchmarks/eager_overhead.py).
A device's caching allocator never returns its memory to the system between steps; neither does the heap now.

glibc only; MALLOC_TRIM_THRESHOLD_ or MALLOC_MMAP_THRESHOLD_ in the environment (glibc's own tunables)
take precedence over these values.
"""
import ctypes
import platform

from localneuron.runtime.environment import given

_M_TRIM_THRESHOLD = -1  # <malloc.h>
_M_MMAP_THRESHOLD = -3
TRIM_THRESHOLD = 2**31 - 1  # free bytes kept at the top of a heap before they go back (mallopt takes an int)
MMAP_THRESHOLD = 32 << 20   # requests served by mmap from this size on (glibc's largest: HEAP_MAX_SIZE / 2)


def keep_heap_for_reuse() -> None:
    """Sets glibc's trim and mmap thresholds unless the environment sets them."""
    if platform.system() != "Linux" or platform.libc_ver()[0] != "glibc":
        return
    libc = ctypes.CDLL(None)
    for variable, parameter, value in (("MALLOC_TRIM_THRESHOLD_", _M_TRIM_THRESHOLD, TRIM_THRESHOLD),
                                       ("MALLOC_MMAP_THRESHOLD_", _M_MMAP_THRESHOLD, MMAP_THRESHOLD)):
        if given(variable) is None:
            libc.mallopt(parameter, value)
