"""nisa.dma_copy: move data between HBM and SBUF (or within either) on the DMA queues."""
import math

import numpy as np

from .. import buffers, checks
from ..errors import require
from ..run import current_run
from ..generation import at_least
from .constants import dge_mode as dge_modes, oob_mode as oob_modes

OP = "dma_copy"
HBM_DESCRIPTOR_BYTES = 64 * 1024


def contiguous_run(tile):
    """Elements the view reads or writes contiguously at a time (one DMA descriptor's worth)."""
    run, expected = 1, 1
    for n, stride in reversed(list(zip(tile.shape, tile.strides))):
        if n == 1:
            continue
        if stride != expected:
            break
        run *= n
        expected *= n
    return run


def dma_copy(dst, src, oob_mode=oob_modes.error, dge_mode=dge_modes.unknown, engine=None, name=None):
    run = current_run()
    checks.tensor_arg(OP, "src", src)
    require(src.buffer is not buffers.psum,
            f"{OP}: src is in PSUM, but the DMA engine can only read HBM or SBUF (since NKI 0.3); "
            f"copy the tile to SBUF with nisa.tensor_copy first")
    checks.access(OP, "dma", "src", src, "read")
    checks.access(OP, "dma", "dst", dst, "write")
    require(dst.size == src.size,
            f"{OP}: dst has {dst.size} elements but src has {src.size}; element counts must match")
    for param, tile in (("src", src), ("dst", dst)):
        if tile.buffer.on_chip:
            require(tile.num_partitions <= run.target.partitions,
                    f"{OP}: {param} has {tile.num_partitions} partitions, exceeding the limit "
                    f"pmax={run.target.partitions}")
    if dge_mode is dge_modes.hwdge:
        require(at_least(run.target, "gen3"), f"{OP}: dge_mode=hwdge needs gen3 or newer, target is {run.target.name}")
        require(src.dtype is dst.dtype, f"{OP}: dge_mode=hwdge needs identical dtypes, got src {src.dtype} "
                                        f"and dst {dst.dtype}; reinterpret with .view() instead")
    if run.numerics:
        # Different dtypes convert through fp32; equal dtypes copy the stored values unchanged.
        dst.write(src.read(), run.precise)

    schedule_transfer(run, OP, src, dst)


def schedule_transfer(run, op, src, dst, not_before=0.0):
    """Cost one DMA transfer: descriptors of the contiguous runs both sides allow, one partition row
    per descriptor at most (on-chip), or up to 64 KiB each (HBM to HBM)."""
    itemsize = max(src.dtype.itemsize, dst.dtype.itemsize)
    chunk = max(1, min(contiguous_run(src), contiguous_run(dst)))
    on_chip = dst if dst.buffer.on_chip else src if src.buffer.on_chip else None
    if on_chip is not None:
        # One row per partition; a descriptor never crosses a partition.
        rows = on_chip.num_partitions if on_chip.ndim else 1
        per_row = max(1, on_chip.size // max(rows, 1))
        chunk = min(chunk, per_row)
        run.timeline.dma(op, rows, math.ceil(per_row / chunk), chunk * itemsize, reads=[src], writes=[dst],
                         not_before=not_before)
    else:
        # HBM to HBM: contiguous runs, split into descriptors of at most 64 KiB.
        chunk = min(chunk, max(1, HBM_DESCRIPTOR_BYTES // itemsize))
        run.timeline.dma(op, math.ceil(src.size / chunk), 1, chunk * itemsize, reads=[src], writes=[dst],
                         rows_per_queue=1, not_before=not_before)


# dma_transpose: the permutation for each rank of src (the i-th axis of dst is axis perm[i] of src)
DMA_TRANSPOSE_AXES = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}


def dma_transpose(dst, src, axes=None, dge_mode=dge_modes.unknown, oob_mode=oob_modes.error, name=None):
    """Transpose src into dst with the DMA engine: [1, 0] for 2-d, [2, 1, 0] for 3-d, [3, 1, 2, 0] for 4-d."""
    op = "dma_transpose"
    run = current_run()
    checks.access(op, "dma", "src", src, "read")
    checks.access(op, "dma", "dst", dst, "write")
    expected = DMA_TRANSPOSE_AXES.get(src.ndim)
    require(expected is not None, f"{op}: src must be 2-, 3- or 4-d, got shape {list(src.shape)}")
    require(axes is None or tuple(axes) == expected,
            f"{op}: axes={tuple(axes) if axes is not None else None} is not supported for a {src.ndim}-d src; "
            f"the supported permutation is {expected}")
    require(src.dtype.itemsize == 2 or dge_mode is not dge_modes.hwdge,
            f"{op}: dge_mode=hwdge transposes 2-byte dtypes only, got {src.dtype}")
    if dge_mode is dge_modes.hwdge:
        require(at_least(run.target, "gen3"), f"{op}: dge_mode=hwdge needs gen3 or newer, target is {run.target.name}")
    transposed_shape = tuple(src.shape[a] for a in expected)
    require(dst.size == src.size, f"{op}: dst has {dst.size} elements but src has {src.size}")
    if run.numerics:
        dst.write(np.transpose(src.read(), expected).reshape(dst.shape), run.precise)
    # A transpose moves one element per descriptor along the transposed axis (2-byte elements, 4-byte runs)
    rows = dst.num_partitions if dst.buffer.on_chip and dst.ndim else transposed_shape[0]
    run.timeline.dma(op, rows, max(1, dst.size // max(rows, 1)), dst.dtype.itemsize, reads=[src], writes=[dst])


def dma_compute(dst, srcs, reduce_op, scales=None, unique_indices=False, name=None):
    """dst = reduce_op over srcs[i] * scales[i], element-wise, computed by the DMA engine on the fly (e.g. a
    residual add fused into a load)."""
    op = "dma_compute"
    run = current_run()
    from .. import alu
    require(isinstance(srcs, (list, tuple)) and len(srcs) >= 1, f"{op}: srcs must be a list of tensors")
    require(reduce_op in (alu.add, alu.maximum, alu.minimum, alu.multiply),
            f"{op}: reduce_op must be nl.add, nl.maximum, nl.minimum or nl.multiply, got {reduce_op!r}")
    factors = [1.0] * len(srcs) if scales is None else [float(s) for s in scales]
    require(len(factors) == len(srcs), f"{op}: {len(srcs)} srcs but {len(factors)} scales")
    checks.access(op, "dma", "dst", dst, "write")
    for i, src in enumerate(srcs):
        checks.access(op, "dma", f"srcs[{i}]", src, "read")
        require(src.size == dst.size, f"{op}: srcs[{i}] has {src.size} elements but dst has {dst.size}")
    if run.numerics:
        total = None
        for src, factor in zip(srcs, factors):
            values = src.read_fp32().reshape(dst.shape) * np.float32(factor)
            total = values if total is None else reduce_op.apply(total, values)
        dst.write(total, run.precise)
    for src in srcs:
        schedule_transfer(run, op, src, dst)
