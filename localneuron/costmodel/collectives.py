"""Collectives between NeuronCores: ring and tree all-reduce, all-gather, reduce-scatter, send/recv,
each a latency term per algorithm step plus a bandwidth term, over NeuronLink within an instance and
EFA between instances (rules in assumptions.py).

A group is described by where its ranks sit: how many, how many share an instance, and how many
groups of the same kind use an instance's EFA at the same time (every data-parallel group of a job
reduces its gradients at once).
"""
import math
from dataclasses import dataclass

from localneuron.costmodel.assumptions import EFA_LATENCY_S
from localneuron.costmodel.hardware import Chip


@dataclass(frozen=True)
class Group:
    ranks: int
    ranks_per_instance: int     # ranks of this group on one instance
    concurrent_groups: int = 1  # groups of this kind sharing one instance's EFA at once

    @property
    def instances(self) -> int:
        return math.ceil(self.ranks / self.ranks_per_instance)


def _link(chip: Chip, group: Group) -> tuple[float, float]:
    """(latency of one algorithm step, bandwidth of the slowest ring edge) for the group's placement."""
    step = chip.core.dma_fixed_latency_ns * 1e-9
    if group.instances > 1:
        return step + EFA_LATENCY_S, chip.efa_bytes_per_s / group.concurrent_groups
    if group.ranks <= chip.logical_cores:   # all on one chip: a DMA copy between the cores' HBM
        return step, chip.memory_bytes_per_s_per_core
    return step, chip.neuronlink_bytes_per_s_per_direction


def all_reduce(chip: Chip, nbytes: float, group: Group) -> float:
    n = group.ranks
    if n <= 1 or nbytes <= 0:
        return 0.0
    step, bandwidth = _link(chip, group)
    ring = 2 * (n - 1) * step + 2 * (n - 1) / n * nbytes / bandwidth
    tree = 2 * math.ceil(math.log2(n)) * step + 2 * nbytes / bandwidth
    return min(ring, tree)


def all_gather(chip: Chip, gathered_bytes: float, group: Group) -> float:
    """`gathered_bytes`: the full result every rank ends with."""
    n = group.ranks
    if n <= 1 or gathered_bytes <= 0:
        return 0.0
    step, bandwidth = _link(chip, group)
    return (n - 1) * step + (n - 1) / n * gathered_bytes / bandwidth


def reduce_scatter(chip: Chip, input_bytes: float, group: Group) -> float:
    """`input_bytes`: the full tensor each rank contributes (it keeps 1/n of the reduced result)."""
    return all_gather(chip, input_bytes, group)


def send_recv(chip: Chip, nbytes: float, across_instances: bool, concurrent: int = 1) -> float:
    if nbytes <= 0:
        return 0.0
    placement = Group(ranks=2, ranks_per_instance=1 if across_instances else 2, concurrent_groups=concurrent)
    step, bandwidth = _link(chip, placement) if across_instances else (
        chip.core.dma_fixed_latency_ns * 1e-9, chip.neuronlink_bytes_per_s_per_direction)
    return step + nbytes / bandwidth


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
    """One call of a c10d collective among `ranks` processes of one job, one NeuronCore each."""
    if kind in ("send", "recv"):
        return send_recv(chip, nbytes, across_instances=ranks > chip.cores_per_instance)
    group = Group(ranks, min(ranks, chip.cores_per_instance))
    if kind == "barrier":   # a zero-byte all-reduce: latency only
        return 2 * math.ceil(math.log2(max(ranks, 2))) * _link(chip, group)[0] if ranks > 1 else 0.0
    return C10D_ALGORITHMS[kind](chip, nbytes, group)
