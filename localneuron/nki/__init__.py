"""localneuron.nki: the Neuron Kernel Interface on a simulated NeuronCore.

User code imports it as `nki` (`import nki`, `import nki.language as nl`, `import nki.isa as nisa`).
"""
from . import isa, language
from .calls import clear_kernel_calls, kernel_calls
from .cycle_model import KernelReport
from .errors import NkiCapacityError, NkiConstraintError, NkiUsageError
from .kernel import Kernel, ShapeOnly, benchmark, jit, simulate, simulate_kernel
from .tensor import NkiTensor

__all__ = ["Kernel", "KernelReport", "NkiCapacityError", "NkiConstraintError", "NkiTensor", "NkiUsageError",
           "ShapeOnly", "benchmark", "clear_kernel_calls", "isa", "jit", "kernel_calls", "language",
           "simulate", "simulate_kernel"]


def __getattr__(name):
    # The PyTorch integration imports torch; load it only when it is asked for.
    if name in ("nki_op", "wrap_nki"):
        from . import torch_integration
        return getattr(torch_integration, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
