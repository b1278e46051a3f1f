"""Fused helpers built from several instructions: softmax, rms_norm, where, dropout; random tiles."""
import numpy as np

from .. import alu, buffers, isa
from ..activations import BY_NAME as ACT
from ..dtypes import as_dtype, float32
from ..errors import require
from ..run import current_run
from ..tensor import NkiTensor
from .creation import ndarray


def _column(p):
    return ndarray((p, 1), float32, buffers.sbuf)


def _last_axis(op, x, axis):
    require(axis in (-1, x.ndim - 1) and x.ndim == 2,
            f"{op}: axis={axis} must be the free axis of a 2-D [P, F] tile, got shape {list(x.shape)}")


def softmax(x, axis=-1, dtype=None):
    """Row softmax: max (Vector), exp(x - max) with the row sum in the same ScalarE instruction,
    reciprocal, scale (Vector)."""
    _last_axis("softmax", x, axis)
    p = x.num_partitions
    neg_max = _column(p)
    isa.tensor_reduce(neg_max, alu.maximum, x, axis=1, negate=True, keepdims=True)
    exps = ndarray(x.shape, float32, buffers.sbuf)
    total = _column(p)
    isa.activation(exps, ACT["exp"], x, bias=neg_max, reduce_op=alu.add, reduce_res=total)
    inverse = _column(p)
    isa.activation(inverse, ACT["reciprocal"], total)
    out = ndarray(x.shape, as_dtype(dtype) if dtype else x.dtype, buffers.sbuf)
    isa.tensor_scalar(out, exps, alu.multiply, inverse)
    return out


def broadcast_partitions(row, partitions):
    """Copy a [1, F] tile to [partitions, F] with a TensorE ones-matmul (engines cannot move data
    across partitions element-wise)."""
    ones = ndarray((1, partitions), row.dtype if row.dtype.is_float else float32, buffers.sbuf)
    isa.memset(ones, 1.0)
    wide = ndarray((partitions, row.free_size), float32, buffers.psum)
    isa.nc_matmul(wide, ones, row)
    return wide


def rms_norm(x, w, axis=-1, n=None, epsilon=1e-6, dtype=None):
    """x / sqrt(mean(x^2) + epsilon) * w, rows on partitions; w is [P, F] or a [1, F] row."""
    _last_axis("rms_norm", x, axis)
    p, f = x.num_partitions, x.free_size
    n = n or f
    squares = ndarray(x.shape, float32, buffers.sbuf)
    sum_sq = _column(p)
    isa.activation(squares, ACT["square"], x, reduce_op=alu.add, reduce_res=sum_sq)
    eps = _column(p)
    isa.memset(eps, epsilon)
    inv_rms = _column(p)
    isa.activation(inv_rms, ACT["rsqrt"], sum_sq, bias=eps, scale=1.0 / n)
    normed = ndarray(x.shape, float32, buffers.sbuf)
    isa.tensor_scalar(normed, x, alu.multiply, inv_rms)
    weight = w if w.num_partitions == p else broadcast_partitions(w, p)
    out = ndarray(x.shape, as_dtype(dtype) if dtype else x.dtype, buffers.sbuf)
    isa.tensor_tensor(out, normed, weight, alu.multiply)
    return out


def where(condition, x, y, dtype=None):
    """x where condition is non-zero, else y (a tile of the same shape or a number)."""
    out = ndarray(condition.shape, as_dtype(dtype) if dtype else x.dtype, buffers.sbuf)
    isa.elementwise.select(out, condition, x, y if isinstance(y, NkiTensor) else float(y))
    return out


def random_seed(seed):
    """Seed the kernel's random-number generator (each kernel run starts from seed 0)."""
    current_run().random = np.random.default_rng(int(seed))


def rand(shape, dtype=float32):
    """A new SBUF tile of uniform [0, 1) values, generated on GpSimd."""
    run = current_run()
    out = ndarray(shape, dtype, buffers.sbuf)
    isa.gpsimd.generate(out, (lambda: run.random.random(out.shape, dtype=np.float32)) if run.numerics else None, "rand")
    return out


def dropout(x, rate, dtype=None):
    """Zero each element with probability `rate` (no rescaling, as nl.dropout documents)."""
    keep = rand(x.shape)
    mask = alu.greater_equal(keep, float(rate))
    return alu.multiply(x, mask, dtype=dtype or x.dtype)
