"""Errors TorchNeuron's lowering raises with another type or wording than PyTorch's CPU kernel, raised here as both.

A program ported to Trainium may catch TorchNeuron's type; one written for the CPU catches PyTorch's. Where the two
differ, the error raised is an instance of both (one of the classes below, each deriving from the two built-ins) and its
message carries both wordings: TorchNeuron's (as TorchNeuron's own tests match it) and PyTorch's CPU kernel's. Where
only the wording differs, the error keeps PyTorch's type with both wordings.

Every check here reads shapes, dtypes and list lengths only, which the executor's signature fixes: policy.on_miss runs
the call's check (rule_for: the op record's lowering_error field, or the foreach scalar-list rule for every
_foreach_*.ScalarList overload) before anything is cached or queued, so the error is raised at the call
in both execution modes (a call that raises caches no executable, so each such call misses and raises again).

Errors that depend on values are raised where the kernel reads the values: at the call in blocking mode (and on a
signature's first call), held and raised at the next synchronisation point in the asynchronous mode. One of them has
another type on TorchNeuron: an index out of bounds in advanced indexing (aten::index), which TorchNeuron's device
kernel reports as RuntimeError and PyTorch's as IndexError, with the same words. The op records' kernel_error field
names such a rule (index_out_of_bounds below); ops/policy.py's kernel_error() and held_error_type() apply it
wherever the error surfaces.

Sources of the wordings: TorchNeuron's, the patterns of its own tests (tests/python_ops: test_index_select,
test_index_select_backward, test_mm, test_foreach_ops, test_index_copy), where its mm wording is PyTorch's own meta
function's (torch/_meta_registrations.py); PyTorch's, its CPU kernels' messages (torch 2.13).
"""
import re

import torch


class TypeAndRuntimeError(TypeError, RuntimeError):
    """TorchNeuron raises TypeError where PyTorch raises RuntimeError (an index of a float dtype)."""


class ValueAndRuntimeError(ValueError, RuntimeError):
    """TorchNeuron raises ValueError where PyTorch raises RuntimeError (list lengths, slice shapes)."""


class ValueAndIndexError(ValueError, IndexError):
    """TorchNeuron raises ValueError where PyTorch raises IndexError (index_copy dimensionality)."""


class IndexAndRuntimeError(IndexError, RuntimeError):
    """TorchNeuron raises RuntimeError where PyTorch raises IndexError (an index out of bounds in aten::index)."""


# PyTorch's c10::ScalarType names, as its messages print a dtype ("got: Float")
SCALAR_TYPE_NAMES = {
    torch.float32: "Float", torch.float64: "Double", torch.float16: "Half", torch.bfloat16: "BFloat16",
    torch.bool: "Bool", torch.uint8: "Byte", torch.int8: "Char", torch.int16: "Short", torch.int32: "Int",
    torch.int64: "Long", torch.complex64: "ComplexFloat", torch.complex128: "ComplexDouble",
}
_INDEX_DTYPES = (torch.int32, torch.int64)


def _both(torchneuron: str, pytorch: str) -> str:
    return torchneuron if torchneuron == pytorch else f"{torchneuron} (PyTorch: {pytorch})"


def _shape(sizes) -> str:
    return str(tuple(int(s) for s in sizes))


def index_select(a: dict):
    index = a.get("index")
    if isinstance(index, torch.Tensor) and index.dim() <= 1 and index.dtype not in _INDEX_DTYPES:
        message = "index_select(): Expected dtype int32 or int64 for index"
        return TypeAndRuntimeError(_both(message, message))
    return None


def index_select_backward(a: dict):
    index = a.get("index")
    if isinstance(index, torch.Tensor) and index.dtype not in _INDEX_DTYPES:
        return TypeAndRuntimeError(_both(
            f"index_select_backward(): Expected dtype int32/int64 for index but got: {index.dtype}",
            f"index_add_(): Expected dtype int32/int64 for index but got: "
            f"{SCALAR_TYPE_NAMES.get(index.dtype, str(index.dtype))}"))
    return None


def mm(a: dict):
    mat1, mat2 = a.get("self"), a.get("mat2")
    if not isinstance(mat1, torch.Tensor) or not isinstance(mat2, torch.Tensor):
        return None
    if mat1.dim() != 2:
        return RuntimeError(_both("a must be 2D", "self must be a matrix"))
    if mat2.dim() != 2:
        return RuntimeError(_both("b must be 2D", "mat2 must be a matrix"))
    if mat1.shape[1] != mat2.shape[0]:
        return RuntimeError(_both(
            f"a and b must have same reduction dim, but got {list(mat1.shape)} X {list(mat2.shape)}.",
            f"mat1 and mat2 shapes cannot be multiplied ({mat1.shape[0]}x{mat1.shape[1]} and "
            f"{mat2.shape[0]}x{mat2.shape[1]})"))
    return None


def _foreach_scalar_list(a: dict):
    tensors, scalars = a.get("self"), a.get("scalars")
    if isinstance(tensors, (list, tuple)) and isinstance(scalars, (list, tuple)) and tensors \
            and len(tensors) != len(scalars):
        message = "Tensor list must have same number of elements as scalar list."
        return ValueAndRuntimeError(_both(message, message))
    return None


def index_copy(a: dict):
    """The two shape errors of index_copy's checks, in PyTorch's order; any other error is PyTorch's alone."""
    self, index, source, dim = a.get("self"), a.get("index"), a.get("source"), a.get("dim")
    if not all(isinstance(t, torch.Tensor) for t in (self, index, source)) or not isinstance(dim, int):
        return None
    if index.dim() >= 2 or (source.dim() == 0 and index.numel() != 1):
        return None
    if self.dim() > 0 and not -self.dim() <= dim < self.dim():
        return None
    dim = dim % self.dim() if self.dim() > 0 else 0
    requested = list(self.shape)
    if requested:
        requested[dim] = index.numel()
    broadcast = f"Incompatible shapes for broadcasting: {_shape(source.shape)} and requested shape {_shape(requested)}"
    if source.dim() != self.dim() and source.dim() != 0 and self.dim() != 0:
        return ValueAndIndexError(_both(
            broadcast, "index_copy_(): When source and destination are not scalars, their dimensionality must match. "
            f"Source dimensionality ({source.dim()}), destination dimensionality ({self.dim()})"))
    if index.dtype != torch.int64 or self.dtype != source.dtype:
        return None
    self_slice = [s for k, s in enumerate(self.shape) if k != dim]
    source_slice = [s for k, s in enumerate(source.shape) if k != dim] if source.dim() > 0 else []
    if self.dim() > 0 and source.dim() > 0 and self_slice != source_slice:
        return ValueAndRuntimeError(_both(
            broadcast, "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice "
            f"shape: {' '.join(map(str, self_slice))} at dimension {dim} and source slice shape: "
            f"{' '.join(map(str, source_slice))} at dimension 0."))
    return None


def rule_for(schema, recorded):
    """The check of TorchNeuron's lowering for calls of `schema`: its op record's (`recorded`, or None), else the
    foreach scalar-list rule for every _foreach_*.ScalarList overload, else None. A check takes the call's arguments
    by name (ops/arguments.bind) and returns the error to raise, as both types, or None (PyTorch's kernel then raises
    its own error, if any)."""
    if recorded is None and schema.name.startswith("aten::_foreach_") and schema.overload_name == "ScalarList":
        return _foreach_scalar_list
    return recorded


# The one value check, found by a device kernel, whose type differs: PyTorch's advanced-indexing kernel raises
# IndexError "index 15 is out of bounds for dimension 0 with size 4" (TORCH_CHECK_INDEX); TorchNeuron's raises
# RuntimeError with the same words (its tests/python_ops/test_index.py, test_out_of_bounds_indexing_raises_error).
# The rule is this op's check only (aten::index's record names it), not every IndexError a device kernel raises:
# TorchNeuron's own tests show its type for this check alone. For other kernels' value errors they accept either type
# (test_embedding's out-of-range index: (IndexError, RuntimeError)), and for its shape checks they expect IndexError
# ("Dimension out of range": test_stack, test_cumsum, test_transpose_view), so a wider rule would assert a type
# nothing shows TorchNeuron raises.
_OUT_OF_BOUNDS = re.compile(r"index -?\d+ is out of bounds for dimension \d+ with size \d+")


def index_out_of_bounds(kernel_error_type: str, message: str):
    """aten::index's kernel_error rule: its out-of-bounds IndexError is IndexAndRuntimeError; else None."""
    if kernel_error_type == "IndexError" and _OUT_OF_BOUNDS.search(message):
        return IndexAndRuntimeError
    return None
