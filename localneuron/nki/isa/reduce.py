"""nisa.tensor_reduce: reduce along trailing free axes on the Vector engine."""
import numpy as np

from .. import alu, checks
from ..cycle_model import costs
from ..errors import NkiUsageError, require
from ..run import current_run
from .common import issue

OP = "tensor_reduce"


def reduced_shape(shape, axes, keepdims):
    return tuple(1 if i in axes else n for i, n in enumerate(shape) if keepdims or i not in axes)


def normalise_axes(op, axis, ndim):
    axes = tuple(sorted(a % ndim for a in ((axis,) if isinstance(axis, int) else tuple(axis))))
    require(0 not in axes, f"{op}: axis 0 is the partition dimension, which cannot be reduced; "
                           f"transpose first or matmul with a ones vector")
    require(axes == tuple(range(ndim - len(axes), ndim)),
            f"{op}: axis={list(axes)} must be a trailing run of free axes, e.g. [{ndim - 1}] or "
            f"{list(range(1, ndim))}")
    return axes


def tensor_reduce(dst, op, data, axis, negate=False, keepdims=False, name=None):
    run = current_run()
    if op not in alu.REDUCTIONS:
        raise NkiUsageError(f"{OP}: op={op!r} cannot reduce; use one of {', '.join(map(repr, alu.REDUCTIONS))}")
    checks.compute_operands(OP, "vector", {"data": data}, {"dst": dst})
    axes = normalise_axes(OP, axis, data.ndim)
    expected = reduced_shape(data.shape, axes, keepdims)
    require(dst.num_partitions == data.num_partitions and dst.size == int(np.prod(expected)),
            f"{OP}: dst must have shape {list(expected)} (data reduced over axis {list(axes)}), got {list(dst.shape)}")
    if op.kind == "bitvec":
        checks.integer_dtype(OP, "data", data)
    if run.numerics:
        values = data.read() if op.kind == "bitvec" else data.read_fp32()
        with np.errstate(all="ignore"):
            result = alu.REDUCTIONS[op](values, axis=axes)
        dst.write(-result if negate else result, run.precise)
    bf16_fast = op in (alu.add, alu.maximum) and data.dtype.name == "bfloat16" and dst.dtype.name == "bfloat16"
    issue(run, "vector", OP, costs.vector_reduce(data.free_size, bf16_fast), reads=[data], writes=[dst])
