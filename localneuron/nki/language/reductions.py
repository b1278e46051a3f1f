"""nl reductions along free axes: sum, max, min, prod, mean, var, all (Vector tensor_reduce)."""
import math

from .. import alu, buffers, isa
from ..dtypes import as_dtype, float32
from ..isa.reduce import normalise_axes, reduced_shape
from .creation import ndarray


def _reduce(op, x, axis, dtype, keepdims, negate=False):
    axes = normalise_axes(f"nl reduction ({op.name})", axis, x.ndim)
    out = ndarray(reduced_shape(x.shape, axes, keepdims), as_dtype(dtype) if dtype else x.dtype, buffers.sbuf)
    isa.tensor_reduce(out, op, x, axes, negate=negate, keepdims=keepdims)
    return out


def sum(x, axis, dtype=None, keepdims=False):
    return _reduce(alu.add, x, axis, dtype, keepdims)


def max(x, axis, dtype=None, keepdims=False):
    return _reduce(alu.maximum, x, axis, dtype, keepdims)


def min(x, axis, dtype=None, keepdims=False):
    return _reduce(alu.minimum, x, axis, dtype, keepdims)


def prod(x, axis, dtype=None, keepdims=False):
    return _reduce(alu.multiply, x, axis, dtype, keepdims)


def all(x, axis, dtype=None, keepdims=False):
    # A product of 0/1 flags is 1 only when every flag is set.
    flags = alu.not_equal(x, 0.0)
    return _reduce(alu.multiply, flags, axis, dtype, keepdims)


def _count(x, axis):
    axes = normalise_axes("nl.mean", axis, x.ndim)
    return math.prod(x.shape[a] for a in axes)


def mean(x, axis, dtype=None, keepdims=False):
    total = _reduce(alu.add, x, axis, float32, keepdims)
    out = ndarray(total.shape, as_dtype(dtype) if dtype else x.dtype, buffers.sbuf)
    isa.tensor_scalar(out, total, alu.multiply, 1.0 / _count(x, axis))
    return out


def var(x, axis, dtype=None, keepdims=False):
    """Population variance: mean of squared deviations from the mean."""
    centre = mean(x, axis, float32, keepdims=True)
    deviation = ndarray(x.shape, float32, buffers.sbuf)
    isa.tensor_scalar(deviation, x, alu.subtract, centre.reshape(x.num_partitions, 1))
    squared = alu.multiply(deviation, deviation)
    return mean(squared, axis, dtype or x.dtype, keepdims)
