"""Constraint checks shared by the ISA instructions. Every message names the instruction,
the parameter and the limit, so a failing kernel says what to change."""
from . import buffers
from .errors import NkiConstraintError, NkiUsageError, require
from .run import current_run
from .tensor import NkiTensor

# Which memories each engine may read and write: the NKI architecture guide (memory hierarchy),
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/architecture/trainium_inferentia2_arch.html,
# and dma_copy in https://github.com/aws-neuron/aws-neuron-sdk/blob/master/nki/api/nki/isa/__init__.py.
ENGINE_ACCESS = {
    "tensor": {"read": {"sbuf"}, "write": {"psum"}},
    "vector": {"read": {"sbuf", "psum"}, "write": {"sbuf", "psum"}},
    "scalar": {"read": {"sbuf", "psum"}, "write": {"sbuf", "psum"}},
    "gpsimd": {"read": {"sbuf"}, "write": {"sbuf"}},
    "dma": {"read": {"hbm", "sbuf"}, "write": {"hbm", "sbuf"}},
}

ENGINE_TITLES = {"tensor": "Tensor", "vector": "Vector", "scalar": "Scalar", "gpsimd": "GpSimd", "dma": "DMA"}


def tensor_arg(op, param, value):
    if not isinstance(value, NkiTensor):
        raise NkiUsageError(f"{op}: {param} must be an NKI tensor (nl.ndarray or a view of one), "
                            f"got {type(value).__name__}")
    return value


def access(op, engine, param, tile, mode):
    """`tile` may be read (mode 'read') or written ('write') by `engine`."""
    tensor_arg(op, param, tile)
    where = buffers.kind(tile.buffer)
    allowed = ENGINE_ACCESS[engine][mode]
    if where not in allowed:   # the message is built only on failure: this runs for every operand
        raise NkiConstraintError(
            f"{op}: {param} is in {where.upper()}, but the {ENGINE_TITLES[engine]} engine can only "
            f"{mode} {' or '.join(sorted(a.upper() for a in allowed))}")


def partition_rules(op, param, tile):
    """Partition count <= pmax, contiguous partitions, and the allowed start partitions."""
    if not tile.buffer.on_chip:
        return
    count = tile.num_partitions
    pmax = current_run().target.partitions
    if count > pmax:
        raise NkiConstraintError(f"{op}: {param} has {count} partitions, exceeding the limit pmax={pmax}")
    if tile.ndim and count > 1 and tile.strides[0] != tile.storage.row_size:
        raise NkiConstraintError(f"{op}: {param} steps over partitions; a tile occupies a contiguous partition range")
    start = tile.partition_start
    allowed = (0,) if count > 64 else (0, 64) if count > 32 else (0, 32, 64, 96)
    if start not in allowed:
        raise NkiConstraintError(f"{op}: {param} starts at partition {start}; a {count}-partition access must "
                                 f"start at partition {' or '.join(map(str, allowed))}")


def same_partitions(op, first, a, second, b):
    require(a.num_partitions == b.num_partitions,
            f"{op}: {first} has {a.num_partitions} partitions but {second} has {b.num_partitions}; they must match")


def same_free_size(op, first, a, second, b):
    require(a.free_size == b.free_size,
            f"{op}: {first} has {a.free_size} elements per partition but {second} has {b.free_size}; they must match")


def same_layout(op, first, a, second, b):
    same_partitions(op, first, a, second, b)
    same_free_size(op, first, a, second, b)


def per_partition_vector(op, param, tile, partitions):
    """A [P, 1] operand broadcast along the free dimension."""
    require(tile.num_partitions == partitions and tile.free_size == 1,
            f"{op}: {param} must be a [{partitions}, 1] tile (one value per partition), got {list(tile.shape)}")


def float_dtype(op, param, tile):
    require(tile.dtype.is_float, f"{op}: {param} dtype {tile.dtype} is not supported; it must be a float type")


def integer_dtype(op, param, tile):
    require(tile.dtype.is_int, f"{op}: {param} dtype {tile.dtype} is not supported; bitwise ops need integer types")


def compute_operands(op, engine, reads, writes):
    """Buffer, partition-count and start-partition rules for every operand of a compute instruction."""
    for param, tile in reads.items():
        if tile is not None:
            access(op, engine, param, tile, "read")
            partition_rules(op, param, tile)
    for param, tile in writes.items():
        if tile is not None:
            access(op, engine, param, tile, "write")
            partition_rules(op, param, tile)
