"""Plumbing shared by the ISA instructions: engine choice, scalar-or-vector operands, issue."""
import numpy as np

from .. import buffers, checks
from ..errors import NkiUsageError, require
from ..tensor import NkiTensor
from .constants import engine as engine_enum

ENGINE_NAMES = {engine_enum.tensor: "tensor", engine_enum.vector: "vector", engine_enum.scalar: "scalar",
                engine_enum.gpsimd: "gpsimd", engine_enum.dma: "dma", engine_enum.sync: "dma"}


def pick_engine(op, requested, allowed, default):
    """The engine an instruction runs on: the requested one if legal, else its default."""
    if requested in (None, engine_enum.unknown):
        return default
    if not isinstance(requested, engine_enum):
        raise NkiUsageError(f"{op}: engine must be a nisa.engine value, got {requested!r}")
    name = ENGINE_NAMES[requested]
    require(name in allowed, f"{op}: engine={requested.name} is not supported; use one of "
                             f"{', '.join(sorted(allowed))}")
    return name


def operand(op, param, value, partitions):
    """A scalar immediate, or a [P, 1] fp32 tile broadcast along the free dimension.

    Returns (numpy-broadcastable value or None in timing runs, the tile or None).
    """
    if isinstance(value, NkiTensor):
        checks.per_partition_vector(op, param, value, partitions)
        require(value.dtype.name == "float32",
                f"{op}: {param} must be float32 when it is a [P, 1] tile, got {value.dtype}")
        return value, value
    if isinstance(value, (bool, int, float, np.number)):
        return float(value), None
    raise NkiUsageError(f"{op}: {param} must be a number or a [P, 1] tile, got {type(value).__name__}")


def operand_values(run, value, partitions):
    if isinstance(value, NkiTensor):
        return value.read_fp32().reshape(partitions, 1)
    return np.float32(value)


def as_matrix(run, tile, fp32=True):
    """A tile's values as [partitions, elements per partition]."""
    values = tile.read_fp32() if fp32 else tile.read()
    return values.reshape(tile.num_partitions, tile.free_size)


def issue(run, engine, opcode, cycles, reads, writes):
    """Put the instruction on its engine's stream; non-TensorE access to PSUM ends open
    matmul accumulation groups there (the group is evicted or overwritten)."""
    if run.numerics and engine != "tensor":
        for tile in list(reads) + list(writes):
            if tile is not None and tile.buffer is buffers.psum and tile.storage.matmul_open is not None:
                tile.storage.matmul_open[tile.flat_indices().ravel()] = False
    run.timeline.compute(engine, opcode, cycles, reads, writes)
