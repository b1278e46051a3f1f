"""Instructions between the two physical cores of a logical core (kernel[2]): sendrecv, core_barrier."""
from .. import checks
from ..errors import NkiUsageError, require
from ..run import current_run
from .dma import schedule_transfer


def _group(op):
    run = current_run()
    if run.lnc_group is None:
        raise NkiUsageError(f"{op} exchanges data between the cores of a logical NeuronCore; launch the kernel "
                            f"on both with kernel[2] (it ran on {len(run.coordinates) and run.grid})")
    return run, run.lnc_group


def _rank(op, run, param, value):
    rank = int(value)
    require(0 <= rank < run.grid[0], f"{op}: {param}={value} is not a core of kernel[{run.grid[0]}]")
    return rank


def sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id, dma_engine=None, name=None):
    """Send `src` to core send_to_rank and receive core recv_from_rank's `src` into `dst`, both at once
    (a DMA between the cores' SBUFs or HBM views)."""
    op = "sendrecv"
    run, group = _group(op)
    me = run.coordinates[0]
    to = _rank(op, run, "send_to_rank", send_to_rank)
    frm = _rank(op, run, "recv_from_rank", recv_from_rank)
    checks.access(op, "dma", "src", src, "read")
    checks.access(op, "dma", "dst", dst, "write")
    sent_at = run.timeline.data_ready([src])
    group.send(me, to, pipe_id, (src.read() if run.numerics else None, src.shape, src.dtype, sent_at))
    values, shape, dtype, peer_ready = group.receive(me, frm, pipe_id)
    require(dst.size == _size(shape),
            f"{op}: core {frm} sent a {list(shape)} tile but dst is {list(dst.shape)}; the element counts must match")
    if run.numerics:
        dst.write(values, run.precise)
    schedule_transfer(run, op, src, dst, not_before=peer_ready)


def _size(shape):
    total = 1
    for n in shape:
        total *= int(n)
    return total


def core_barrier(data, cores, name=None):
    """Every core in `cores` waits here until all of them arrived; writes to `data` made before the
    barrier are visible to all of them after it."""
    op = "core_barrier"
    run = current_run()
    members = tuple(sorted({int(c) for c in (cores if isinstance(cores, (tuple, list)) else (cores,))}))
    me = run.coordinates[0] if run.coordinates else 0
    for core in members:
        _rank(op, run, "cores", core)
    require(me in members, f"{op}: core {me} calls a barrier over cores {list(members)} it is not one of")
    checks.tensor_arg(op, "data", data)
    if len(members) == 1:
        return
    run, group = _group(op)
    arrivals = group.barrier(me, members, run.timeline.finish)
    run.timeline.fence(max(arrivals.values()))
