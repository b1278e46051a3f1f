"""nl element-wise math: binary ALU functions (nl.add, ...) and unary functions (nl.exp, ...).

Each call allocates a new SBUF tile and issues one instruction, choosing it the way the NKI
compiler does: equal shapes -> tensor_tensor, a number or a [P, 1] column -> tensor_scalar
(broadcast along the free axis), unary math -> ScalarE activation.
"""
import numpy as np

from .. import buffers, isa
from ..activations import ActivationFunction
from ..alu import AluOp
from ..dtypes import as_dtype, float32, promote
from ..errors import NkiUsageError
from ..tensor import NkiTensor
from .creation import ndarray

_NUMBER = (bool, int, float, np.number)


def _is_column(t, like):
    return isinstance(t, NkiTensor) and t.free_size == 1 and t.num_partitions == like.num_partitions \
        and like.free_size > 1


def _as_fp32_column(t):
    if t.dtype is float32:
        return t
    column = ndarray(t.shape, float32, buffers.sbuf)
    isa.tensor_copy(column, t)
    return column


def binary(op, x, y, dtype=None):
    if isinstance(x, _NUMBER) and isinstance(y, _NUMBER):
        return op.fn(x, y)
    if isinstance(x, NkiTensor) and isinstance(y, NkiTensor) and x.shape == y.shape:
        out = ndarray(x.shape, as_dtype(dtype) if dtype else promote(x.dtype, y.dtype), buffers.sbuf)
        isa.tensor_tensor(out, x, y, op)
        return out
    tile, other, reverse = (x, y, False) if isinstance(x, NkiTensor) and (
        isinstance(y, _NUMBER) or _is_column(y, x)) else (y, x, True)
    if not (isinstance(tile, NkiTensor) and (isinstance(other, _NUMBER) or _is_column(other, tile))):
        raise NkiUsageError(
            f"nl.{op.name}: cannot combine shapes {_shape(x)} and {_shape(y)}; operands must have equal shapes, "
            f"or one must be a number or a [P, 1] column (a partition broadcast needs its own instruction)")
    if isinstance(other, NkiTensor):
        other = _as_fp32_column(other)
    out = ndarray(tile.shape, as_dtype(dtype) if dtype else tile.dtype, buffers.sbuf)
    isa.tensor_scalar(out, tile, op, other, reverse0=reverse)
    return out


def _shape(v):
    return list(v.shape) if isinstance(v, NkiTensor) else type(v).__name__


def unary(function, x, dtype=None):
    out = ndarray(x.shape, as_dtype(dtype) if dtype else x.dtype, buffers.sbuf)
    isa.activation(out, function, x)
    return out


def _vector_unary(name, fn, raw_bits=False):
    def apply(x, dtype=None):
        out = ndarray(x.shape, as_dtype(dtype) if dtype else x.dtype, buffers.sbuf)
        isa.elementwise.vector_unary(out, x, fn, name, raw_bits)
        return out
    apply.__name__ = name
    return apply


negative = _vector_unary("negative", np.negative)
floor = _vector_unary("floor", np.floor)
ceil = _vector_unary("ceil", np.ceil)
trunc = _vector_unary("trunc", np.trunc)
invert = _vector_unary("invert", np.invert, raw_bits=True)
logical_not = _vector_unary("logical_not", lambda v: (v == 0).astype(np.float32))


AluOp.build_tile = staticmethod(binary)
ActivationFunction.build_tile = staticmethod(unary)
