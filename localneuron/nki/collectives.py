"""`nki.collectives`: collective communication between ranks (NeuronCores of different devices) from
inside a kernel: all_reduce, all_gather, reduce_scatter, all_to_all, collective permutes.

A kernel launch here is one rank (rank 0 of a world of one): a collective whose replica group holds only
that rank has its documented single-rank result (all_reduce, all_gather, reduce_scatter and all_to_all copy
src to dst; a permute within one rank is a copy). A replica group naming other ranks needs their kernels
running at the same time, which one launch cannot provide: that raises NkiUsageError naming the ranks, so a
kernel never silently computes a one-rank answer to a many-rank question. The two cores of kernel[2]
exchange data with nisa.sendrecv and nisa.core_barrier instead.
"""
from . import alu, checks
from .errors import NkiUsageError, require
from .isa.dma import schedule_transfer
from .run import current_run

WORLD_RANK = 0


class ReplicaGroup:
    """Groups of ranks that take part in a collective together, e.g. ReplicaGroup([[0, 1, 2, 3]])."""

    def __init__(self, groups):
        groups = [list(int(r) for r in group) for group in groups]
        if not groups or any(not group for group in groups):
            raise NkiUsageError(f"ReplicaGroup needs non-empty lists of ranks, got {groups}")
        seen = [r for group in groups for r in group]
        if len(seen) != len(set(seen)):
            raise NkiUsageError(f"ReplicaGroup: a rank appears in more than one group: {groups}")
        self.groups = groups

    def group_of(self, rank):
        for group in self.groups:
            if rank in group:
                return group
        raise NkiUsageError(f"rank {rank} is in no group of {self.groups}")

    def __repr__(self):
        return f"ReplicaGroup({self.groups})"


def rank_id():
    """This kernel's rank in the world of ranks (one launch is rank 0)."""
    current_run()
    return WORLD_RANK


def _single_rank_group(op, replica_group):
    if replica_group is None:
        return [WORLD_RANK]
    if not isinstance(replica_group, ReplicaGroup):
        replica_group = ReplicaGroup(replica_group)
    group = replica_group.group_of(WORLD_RANK)
    if len(group) > 1:
        raise NkiUsageError(
            f"nki.collectives.{op} over ranks {group} needs those ranks' kernels running together; a kernel launch "
            f"on localneuron is one rank (rank {WORLD_RANK}), so only single-rank replica groups run here. Between "
            f"the two cores of kernel[2], use nisa.sendrecv and nisa.core_barrier")
    return group


def _copy_each(op, dsts, srcs):
    run = current_run()
    require(len(dsts) == len(srcs), f"nki.collectives.{op}: {len(srcs)} srcs but {len(dsts)} dsts")
    for i, (dst, src) in enumerate(zip(dsts, srcs)):
        checks.access(op, "dma", f"srcs[{i}]", src, "read")
        checks.access(op, "dma", f"dsts[{i}]", dst, "write")
        require(dst.size == src.size, f"nki.collectives.{op}: on one rank dsts[{i}] ({list(dst.shape)}) must hold "
                                      f"exactly srcs[{i}] ({list(src.shape)})")
        if run.numerics:
            dst.write(src.read(), run.precise)
        schedule_transfer(run, f"collective_{op}", src, dst)


def all_reduce(dsts, srcs, op, replica_group=None, name=None):
    require(op in alu.REDUCTIONS, f"nki.collectives.all_reduce: op={op!r} cannot reduce")
    _single_rank_group("all_reduce", replica_group)
    _copy_each("all_reduce", dsts, srcs)


def all_gather(dsts, srcs, replica_group=None, collective_dim=0, name=None):
    _single_rank_group("all_gather", replica_group)
    _copy_each("all_gather", dsts, srcs)


def reduce_scatter(dsts, srcs, op, replica_group=None, collective_dim=0, name=None):
    require(op in alu.REDUCTIONS, f"nki.collectives.reduce_scatter: op={op!r} cannot reduce")
    _single_rank_group("reduce_scatter", replica_group)
    _copy_each("reduce_scatter", dsts, srcs)


def all_to_all(dsts, srcs, replica_group=None, collective_dim=0, name=None):
    _single_rank_group("all_to_all", replica_group)
    _copy_each("all_to_all", dsts, srcs)


def collective_permute_implicit(srcs_by_channel, dsts_by_channel, replica_group=None, channel_ids=None, name=None):
    """Each rank sends to the next rank of its group on every channel; with one rank, to itself."""
    _single_rank_group("collective_permute_implicit", replica_group)
    for srcs, dsts in zip(srcs_by_channel, dsts_by_channel):
        _copy_each("collective_permute_implicit", list(dsts), list(srcs))


def collective_permute_implicit_current_processing_rank_id(iteration_id, channel_id, replica_group=None):
    """The rank whose data this rank holds after `iteration_id` steps of an implicit permute ring."""
    group = _single_rank_group("collective_permute_implicit_current_processing_rank_id", replica_group)
    return group[(group.index(WORLD_RANK) - int(iteration_id)) % len(group)]
