"""GpSimd instructions that generate patterns: iota and affine_select."""
import math

import numpy as np

from .. import alu, checks
from ..cycle_model import costs
from ..errors import require
from ..run import current_run
from .common import as_matrix, issue


def affine_values(op, dst, pattern, offset, channel_multiplier):
    """offset + partition * channel_multiplier + sum(step * index) over a [[step, count], ...] pattern."""
    counts = [int(c) for _, c in pattern]
    require(len(pattern) <= 4, f"{op}: pattern has {len(pattern)} dimensions; at most 4 are supported")
    require(math.prod(counts) == dst.free_size,
            f"{op}: pattern covers {math.prod(counts)} elements per partition but dst has {dst.free_size}")
    values = np.full((dst.num_partitions, *counts), int(offset), dtype=np.int64)
    values += (np.arange(dst.num_partitions) * int(channel_multiplier)).reshape(-1, *([1] * len(counts)))
    for axis, (step, count) in enumerate(pattern):
        shape = [1] * (len(counts) + 1)
        shape[axis + 1] = int(count)
        values += (np.arange(int(count)) * int(step)).reshape(shape)
    return values.reshape(dst.num_partitions, dst.free_size)


def iota(dst, pattern, offset, channel_multiplier=0, name=None):
    op = "iota"
    run = current_run()
    checks.compute_operands(op, "gpsimd", {}, {"dst": dst})
    values = affine_values(op, dst, pattern, offset, channel_multiplier)
    if run.numerics:
        dst.write(values.astype(np.float32) if dst.dtype.is_float else values, run.precise)
    issue(run, "gpsimd", op, costs.gpsimd(dst.free_size), reads=[], writes=[dst])


def affine_select(dst, pattern, offset, channel_multiplier, on_true_tile, on_false_value, cmp_op=alu.equal, name=None):
    """dst = on_true_tile where cmp_op(affine expression, 0) holds, else on_false_value (e.g. causal masks)."""
    op = "affine_select"
    run = current_run()
    checks.compute_operands(op, "gpsimd", {"on_true_tile": on_true_tile}, {"dst": dst})
    checks.same_layout(op, "dst", dst, "on_true_tile", on_true_tile)
    require(cmp_op.kind == "compare", f"{op}: cmp_op must be a comparison such as nl.greater_equal, got {cmp_op!r}")
    for param, tile in (("dst", dst), ("on_true_tile", on_true_tile)):
        require(tile.dtype.is_float or tile.dtype.itemsize <= 2,
                f"{op}: {param} dtype {tile.dtype} is not supported; use a float or an 8/16-bit integer type")
    values = affine_values(op, dst, pattern, offset, channel_multiplier)
    if run.numerics:
        keep = cmp_op.apply(values, 0) != 0
        dst.write(np.where(keep, as_matrix(run, on_true_tile), np.float32(on_false_value)), run.precise)
    issue(run, "gpsimd", op, costs.gpsimd(dst.free_size), reads=[on_true_tile], writes=[dst])


def generate(dst, values, opcode):
    """GpSimd writes generated values (random numbers) into an SBUF tile; `values` is a callable
    producing them, or None in a timing-only run."""
    run = current_run()
    checks.compute_operands(opcode, "gpsimd", {}, {"dst": dst})
    if run.numerics:
        dst.write(values(), run.precise)
    issue(run, "gpsimd", opcode, costs.gpsimd(dst.free_size), reads=[], writes=[dst])


PARTITIONS_PER_GPSIMD_CORE = 16


def nonzero_with_count(dst, src, index_offset=0, padding_val=-1, name=None):
    """Per partition: the indices (plus index_offset) of src's non-zero elements, in order, then padding_val,
    and the count of non-zero elements as the last element (dst holds src's elements per partition + 1)."""
    op = "nonzero_with_count"
    run = current_run()
    checks.compute_operands(op, "gpsimd", {"src": src}, {"dst": dst})
    checks.same_partitions(op, "dst", dst, "src", src)
    n = src.free_size
    require(dst.free_size == n + 1, f"{op}: dst must hold {n + 1} elements per partition (the {n} indices, then the "
                                    f"count), got {dst.free_size}")
    require(dst.dtype.is_int, f"{op}: dst holds indices; its dtype must be an integer type, got {dst.dtype}")
    if run.numerics:
        values = as_matrix(run, src, fp32=not src.dtype.is_int)
        out = np.full((src.num_partitions, n + 1), int(padding_val), dtype=np.int64)
        for row in range(src.num_partitions):
            found = np.flatnonzero(values[row] != 0)
            out[row, :found.size] = found + int(index_offset)
            out[row, n] = found.size
        dst.write(out, run.precise)
    issue(run, "gpsimd", op, costs.gpsimd(n), reads=[src], writes=[dst])


def nc_n_gather(dst, data, indices, name=None):
    """Per partition: dst[p, k] = data[p, indices[p, k]] over data's flattened free axes."""
    op = "nc_n_gather"
    run = current_run()
    checks.compute_operands(op, "gpsimd", {"data": data, "indices": indices}, {"dst": dst})
    checks.same_partitions(op, "indices", indices, "data", data)
    checks.same_layout(op, "dst", dst, "indices", indices)
    require(indices.dtype.is_int, f"{op}: indices must be an integer tile (uint32), got {indices.dtype}")
    if run.numerics:
        values = as_matrix(run, data, fp32=not data.dtype.is_int)
        where = as_matrix(run, indices, fp32=False).astype(np.int64)
        require(((where >= 0) & (where < data.free_size)).all(),
                f"{op}: an index is outside the {data.free_size} elements per partition of data")
        dst.write(np.take_along_axis(values, where, axis=1), run.precise)
    issue(run, "gpsimd", op, costs.gpsimd(dst.free_size), reads=[data, indices], writes=[dst])


def local_gather(dst, src_buffer, index, num_elem_per_idx=1, num_valid_indices=None, name=None):
    """Each GpSimd core (16 partitions) gathers from its own 16 partitions of src_buffer: its indices,
    read partition-first from its 16 partitions of `index`, select num_elem_per_idx contiguous elements
    each of the core's buffer (flattened partition-first); results fill its 16 dst partitions
    partition-first."""
    op = "local_gather"
    run = current_run()
    group = PARTITIONS_PER_GPSIMD_CORE
    checks.compute_operands(op, "gpsimd", {"src_buffer": src_buffer, "index": index}, {"dst": dst})
    for param, tile in (("src_buffer", src_buffer), ("index", index), ("dst", dst)):
        require(tile.num_partitions % group == 0,
                f"{op}: {param} has {tile.num_partitions} partitions; each GpSimd core serves {group}, so it must "
                f"be a multiple of {group}")
    per_core = index.size // (index.num_partitions // group)
    valid = per_core if num_valid_indices is None else int(num_valid_indices)
    require(valid <= per_core, f"{op}: num_valid_indices={valid} exceeds the {per_core} indices of a core's slice")
    if run.numerics:
        src = as_matrix(run, src_buffer, fp32=not src_buffer.dtype.is_int)
        idx = as_matrix(run, index, fp32=False).astype(np.int64)
        out = as_matrix(run, dst, fp32=not dst.dtype.is_int).copy()
        k = int(num_elem_per_idx)
        for core in range(index.num_partitions // group):
            rows = slice(core * group, (core + 1) * group)
            buffer = src[rows].reshape(group, -1, k).transpose(1, 0, 2).reshape(-1, k)   # partition-first items
            picks = idx[rows].T.reshape(-1)[:valid]
            require(((picks >= 0) & (picks < buffer.shape[0])).all(),
                    f"{op}: an index is outside the {buffer.shape[0]} items of GpSimd core {core}'s buffer")
            gathered = buffer[picks].reshape(-1)
            flat = out[rows].T.reshape(-1)
            flat[:gathered.size] = gathered
            out[rows] = flat.reshape(-1, group).T
        dst.write(out, run.precise)
    issue(run, "gpsimd", op, costs.gpsimd(dst.free_size), reads=[src_buffer, index], writes=[dst])
