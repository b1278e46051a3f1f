"""Creating tensors: nl.ndarray, nl.zeros, nl.full, ... and the HBM constants."""
import numpy as np

from .. import buffers, isa
from ..dtypes import as_dtype, float32, uint8
from ..run import current_run


def ndarray(shape, dtype, buffer=buffers.sbuf, name="", address=None):
    """A new tensor; its memory is uninitialised (reads show NaN / 4 until written)."""
    return current_run().allocate(shape, as_dtype(dtype), buffer, name)


def empty_like(a, dtype=None, buffer=None, name=""):
    return ndarray(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def full(shape, fill_value, dtype=float32, buffer=buffers.sbuf, name=""):
    tile = ndarray(shape, dtype, buffer, name)
    if buffer.on_chip:
        isa.memset(tile, fill_value)
    else:
        _fill_hbm(tile, np.full(tile.shape, fill_value))
    return tile


def zeros(shape, dtype=float32, buffer=buffers.sbuf, name=""):
    return full(shape, 0, dtype, buffer, name)


def ones(shape, dtype=float32, buffer=buffers.sbuf, name=""):
    return full(shape, 1, dtype, buffer, name)


def zeros_like(a, dtype=None, buffer=None, name=""):
    return zeros(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def ones_like(a, dtype=None, buffer=None, name=""):
    return ones(a.shape, dtype or a.dtype, buffer or a.buffer, name)


def shared_constant(constant, dtype=None):
    """A constant tensor in HBM, filled when the kernel starts (no device instruction)."""
    values = np.asarray(constant)
    tile = ndarray(values.shape, dtype or values.dtype, buffers.shared_hbm)
    _fill_hbm(tile, values)
    return tile


def shared_identity_matrix(n, dtype=uint8):
    """An n x n identity matrix in SBUF (NKI 2.30+: "Create an identity matrix in SBUF"), there when the kernel
    starts: the compiler places one per dtype, so no device instruction is charged."""
    tile = ndarray((n, n), as_dtype(dtype), buffers.sbuf)
    run = current_run()
    if run.numerics:
        tile.write(np.eye(n), run.precise)
    return tile


def _fill_hbm(tile, values):
    # HBM contents are written by the host when the kernel is launched; the cycle model does
    # not charge device time for them.
    run = current_run()
    if run.numerics:
        tile.write(values, run.precise)
