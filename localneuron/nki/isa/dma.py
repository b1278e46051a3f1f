"""nisa.dma_copy: move data between HBM and SBUF (or within either) on the DMA queues."""
import math

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
            require(tile.num_partitions <= checks.PMAX,
                    f"{OP}: {param} has {tile.num_partitions} partitions, exceeding the limit pmax={checks.PMAX}")
    if dge_mode is dge_modes.hwdge:
        require(at_least(run.target, "gen3"), f"{OP}: dge_mode=hwdge needs gen3 or newer, target is {run.target.name}")
        require(src.dtype is dst.dtype, f"{OP}: dge_mode=hwdge needs identical dtypes, got src {src.dtype} "
                                        f"and dst {dst.dtype}; reinterpret with .view() instead")
    if run.numerics:
        # Different dtypes convert through fp32; equal dtypes copy the stored values unchanged.
        dst.write(src.read(), run.precise)

    itemsize = max(src.dtype.itemsize, dst.dtype.itemsize)
    chunk = max(1, min(contiguous_run(src), contiguous_run(dst)))
    on_chip = dst if dst.buffer.on_chip else src if src.buffer.on_chip else None
    if on_chip is not None:
        # One row per partition; a descriptor never crosses a partition.
        rows = on_chip.num_partitions if on_chip.ndim else 1
        per_row = max(1, on_chip.size // max(rows, 1))
        chunk = min(chunk, per_row)
        run.timeline.dma(OP, rows, math.ceil(per_row / chunk), chunk * itemsize, reads=[src], writes=[dst])
    else:
        # HBM to HBM: contiguous runs, split into descriptors of at most 64 KiB.
        chunk = min(chunk, max(1, HBM_DESCRIPTOR_BYTES // itemsize))
        run.timeline.dma(OP, math.ceil(src.size / chunk), 1, chunk * itemsize, reads=[src], writes=[dst],
                         rows_per_queue=1)
