"""Collectives between NeuronCores: ring and recursive-doubling all-reduce, ring all-gather and
reduce-scatter, send/recv: each a launch, a latency per algorithm step and a bandwidth term, over
NeuronLink within an instance and EFA between instances (rules and latencies in assumptions.py). On a
generation whose instance runs KangaRing (KANGARING), a group holding every rank of the instance's chips may
take it instead (kangaring()).

A group is described by where its ranks sit: how many, how many share an instance, and how many
groups of the same kind use an instance's EFA at the same time (every data-parallel group of a job
reduces its gradients at once).
"""
import math
from dataclasses import dataclass

from localneuron.costmodel import assumptions
from localneuron.costmodel.hardware import Chip


@dataclass(frozen=True)
class Group:
    ranks: int
    ranks_per_instance: int     # ranks of this group on one instance
    concurrent_groups: int = 1  # groups of this kind sharing one instance's EFA at once

    @property
    def instances(self) -> int:
        return math.ceil(self.ranks / self.ranks_per_instance)


def _link(chip: Chip) -> tuple[float, float]:
    """(latency of one algorithm step, bandwidth of the slowest ring edge) within one instance: a ring
    runs over one NeuronLink per direction (even between the cores of one chip: the collective's DMA
    rings follow the link's path)."""
    return assumptions.COLLECTIVE_STEP_S, chip.neuronlink_bytes_per_s_per_direction


def _steps(n: int) -> int:
    return math.ceil(math.log2(n))


def _across(chip: Chip, nbytes: float, group: Group, phases: int) -> float:
    """The inter-instance part of a hierarchical collective: every rank moves its 1/m share of the
    (k-1)/k that lives elsewhere over EFA, which all ranks of all groups on the instance share; `phases`
    is 2 for an all-reduce (reduce-scatter, then all-gather), 1 otherwise."""
    k, m = group.instances, group.ranks_per_instance
    efa_share = chip.efa_bytes_per_s / (m * group.concurrent_groups)
    step = assumptions.COLLECTIVE_STEP_S + assumptions.EFA_LATENCY_S
    return phases * ((k - 1) * step + (k - 1) / k * nbytes / m / efa_share)


# --- KangaRing over the whole torus (trn2 and later) ------------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/explore/intranode-collective-comm.html
# (12/2025): a ring runs several cycles over disjoint wires at once, for the links' full bandwidth; on the 16 chips
# of an instance's 2D torus there are two Hamiltonian cycles that share no link, each usable in both directions,
# so every link of a chip carries a quarter of the ring's bytes. KangaRing, for a group holding all the ranks of
# each of its chips (four LNC=2 ranks a Trainium2 chip), pairs the ranks of a chip, makes one of each pair the
# primary and rings only the primaries (half the hops of a flat ring), the roles alternating between the cycles;
# a primary forwards what it receives to its secondary and downstream with one read and two writes (an
# all-gather touches HBM 3 times a chunk for every 2 ranks where a ring touches it 4 times) and reduces its own
# and its secondary's chunk with what it receives in one pass (a reduce-scatter: 4 touches for 2 ranks, a ring 6).
# The page's sizes (KangaRing above 56 MB) are HBM-bound: the time is the slower of the links and the chips' HBM.
# The runtime picks an algorithm by size, from ranges the page gives empirically: mesh below 1 MB, recursive
# doubling-halving from 1 to 56 MB, KangaRing above; the two smaller ones are not priced here (the ring and
# recursive doubling below stand for them), KangaRing only where the runtime takes it.
# Trainium (trn1, LNC=1, two ranks a chip) is not described by it, and its nccom-test rows (a 128 MB all-reduce
# over 64 ranks) are priced within 12% by one link per direction: it keeps the ring.
KANGARING = frozenset({"trn2", "trn3"})
KANGARING_FROM_BYTES = 56 * 2 ** 20
# HBM touches a chunk costs for every rank it passes (reads plus writes): (ring, KangaRing)
HBM_TOUCHES = {"all_gather": (2.0, 1.5), "reduce_scatter": (3.0, 2.0)}


def kangaring(chip: Chip, kind: str, nbytes: float, ranks: int) -> float | None:
    """`kind` ("all_gather" or "reduce_scatter"; an all-reduce is one then the other) of `nbytes` (the gathered
    result, or a reduce-scatter's input) among `ranks` of one instance by KangaRing, without the start; None where
    it does not apply (a generation without it, a group that is not every rank of every chip of the instance, or a
    buffer of at most KANGARING_FROM_BYTES)."""
    if (chip.name not in KANGARING or chip.lnc != 2 or ranks != chip.cores_per_instance
            or nbytes <= KANGARING_FROM_BYTES):
        return None
    share = (ranks - 1) / ranks * nbytes
    links = share / (chip.neuronlink_links * chip.neuronlink_bytes_per_s_per_direction)
    hbm = chip.logical_cores * HBM_TOUCHES[kind][1] * share / chip.hbm_bytes_per_s
    return ranks // 2 * assumptions.COLLECTIVE_STEP_S + max(links, hbm)


def _ring_gather(chip: Chip, gathered_bytes: float, group: Group, kind: str = "all_gather") -> float:
    n = group.ranks
    step, bandwidth = _link(chip)
    if group.instances == 1:
        ring = (n - 1) * step + (n - 1) / n * gathered_bytes / bandwidth
        paired = kangaring(chip, kind, gathered_bytes, n)
        return ring if paired is None else min(ring, paired)
    m = group.ranks_per_instance
    return _across(chip, gathered_bytes, group, 1) + _ring_gather(chip, gathered_bytes, Group(m, m))


def all_reduce(chip: Chip, nbytes: float, group: Group) -> float:
    """Within an instance: the ring, or recursive doubling (log2 n steps, each exchanging the whole
    buffer) when that is faster: small messages. Across instances: reduce-scatter inside each instance,
    all-reduce of each rank's share across them, all-gather inside (hierarchical), or recursive doubling
    over every rank when that is faster."""
    n = group.ranks
    if n <= 1 or nbytes <= 0:
        return 0.0
    step, bandwidth = _link(chip)
    if group.instances == 1:
        ring = 2 * (n - 1) * step + 2 * (n - 1) / n * nbytes / bandwidth
        ring = min(ring, _ring_gather(chip, nbytes, group, "reduce_scatter") + _ring_gather(chip, nbytes, group))
        return assumptions.COLLECTIVE_START_S + min(ring, _steps(n) * (step + nbytes / bandwidth))
    m = group.ranks_per_instance
    inside = Group(m, m)
    hierarchical = (_ring_gather(chip, nbytes, inside, "reduce_scatter") + _ring_gather(chip, nbytes, inside)
                    + _across(chip, nbytes, group, 2))
    efa_share = chip.efa_bytes_per_s / (m * group.concurrent_groups)
    doubling = _steps(n) * (step + nbytes / min(bandwidth, efa_share)) + _steps(group.instances) * assumptions.EFA_LATENCY_S
    return assumptions.COLLECTIVE_START_S + min(hierarchical, doubling)


def all_gather(chip: Chip, gathered_bytes: float, group: Group, kind: str = "all_gather") -> float:
    """`gathered_bytes`: the full result every rank ends with. A ring (or KangaRing) within an instance;
    across instances the shares cross EFA first, then a ring inside each instance."""
    if group.ranks <= 1 or gathered_bytes <= 0:
        return 0.0
    return assumptions.COLLECTIVE_START_S + _ring_gather(chip, gathered_bytes, group, kind)


def reduce_scatter(chip: Chip, input_bytes: float, group: Group) -> float:
    """`input_bytes`: the full tensor each rank contributes (it keeps 1/n of the reduced result)."""
    return all_gather(chip, input_bytes, group, "reduce_scatter")


def send_recv(chip: Chip, nbytes: float, across_instances: bool, concurrent: int = 1) -> float:
    """A point-to-point transfer (pipeline stages): one DMA transfer, no collective launch."""
    if nbytes <= 0:
        return 0.0
    step = chip.core.dma_fixed_latency_ns * 1e-9
    if across_instances:
        return step + assumptions.EFA_LATENCY_S + nbytes / (chip.efa_bytes_per_s / concurrent)
    return step + nbytes / chip.neuronlink_bytes_per_s_per_direction


KINDS = {"all_reduce": all_reduce, "all_gather": all_gather, "reduce_scatter": reduce_scatter}

# c10d collective (as the distributed report names it) -> the algorithm that prices it; bytes are
# the larger of a call's input and output on one rank
C10D_ALGORITHMS = {
    "all_reduce": all_reduce, "all_reduce_coalesced": all_reduce, "reduce": all_reduce,
    "reduce_scatter": reduce_scatter, "reduce_scatter_tensor": reduce_scatter,
    "reduce_scatter_tensor_coalesced": reduce_scatter,
    "all_gather": all_gather, "all_gather_coalesced": all_gather, "all_gather_into_tensor": all_gather,
    "all_gather_into_tensor_coalesced": all_gather,
    "broadcast": all_gather, "gather": all_gather, "scatter": all_gather,   # n-1 steps moving the buffer once
    "all_to_all": all_gather, "all_to_all_single": all_gather,
}


def c10d_seconds(chip: Chip, kind: str, nbytes: float, ranks: int) -> float:
    """One call of a c10d collective among `ranks` processes of one job, one NeuronCore each, issued on
    its own (an eager call, nccom-test): it pays the runtime's collective launch on top of its steps."""
    if kind in ("send", "recv"):
        return send_recv(chip, nbytes, across_instances=ranks > chip.cores_per_instance)
    if ranks <= 1:
        return 0.0
    group = Group(ranks, min(ranks, chip.cores_per_instance))
    if kind == "barrier":   # a zero-byte all-reduce: latency only
        return assumptions.COLLECTIVE_LAUNCH_S + assumptions.COLLECTIVE_START_S + _steps(ranks) * _link(chip)[0]
    return assumptions.COLLECTIVE_LAUNCH_S + C10D_ALGORITHMS[kind](chip, nbytes, group)
