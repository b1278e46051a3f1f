"""localneuron.nki: the Neuron Kernel Interface on a simulated NeuronCore.

User code imports it as `nki` (`import nki`, `import nki.language as nl`, `import nki.isa as nisa`).
"""
from . import isa, language, torch_integration  # noqa: F401  (torch_integration gives kernels their tensor launcher)
from . import report  # noqa: F401  (registers the portability report's NKI section)
from .calls import clear_kernel_calls, kernel_calls
from .cycle_model import KernelReport
from .errors import NkiCapacityError, NkiConstraintError, NkiUsageError
from .kernel import Kernel, ShapeOnly, benchmark, cpu_simulate, jit, simulate, simulate_kernel
from .tensor import NkiTensor
from .torch_integration import nki_op, wrap_nki

__all__ = ["Kernel", "KernelReport", "NkiCapacityError", "NkiConstraintError", "NkiTensor", "NkiUsageError",
           "ShapeOnly", "benchmark", "cpu_simulate", "clear_kernel_calls", "isa", "jit", "kernel_calls", "language",
           "nki_op", "simulate", "simulate_kernel", "wrap_nki"]
