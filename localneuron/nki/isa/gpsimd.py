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
