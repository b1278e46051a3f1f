"""Where the ranks of a TP x PP x DP job sit: Megatron's order (tensor-parallel ranks adjacent, then
data-parallel, then pipeline stages), which decides which collectives stay on NeuronLink and which
cross EFA, and how many share an instance's network at once."""
import dataclasses
from dataclasses import dataclass

from localneuron.costmodel import stacks
from localneuron.costmodel.collectives import Group
from localneuron.costmodel.hardware import Chip, chip


MAX_NODES = 1 << 16   # instances: beyond any cluster (and the estimate's integer shapes)


def target_chip(name: str, lnc: int | None = None, stack: str = stacks.DEFAULT) -> Chip:
    """The target as TorchNeuron runs it (trn2/trn3 at LNC=2), or with `lnc` physical cores per logical
    core where the hardware has that many, its work priced as `stack` runs it."""
    target = dataclasses.replace(chip(name), stack=stacks.check(stack))
    if lnc is None:
        return target
    try:
        return target.at_lnc(lnc)
    except ValueError as error:
        raise ValueError(f"--lnc {lnc}: {error}") from None


class LayoutError(ValueError):
    """The requested parallel layout does not fit the requested instances."""


def _check_positive(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise LayoutError(f"{name} must be a positive integer, got {value!r}")


def check_nodes(chip: Chip, nodes) -> None:
    """--nodes as a count of instances a run can have (every source of the model, --script too)."""
    _check_positive("--nodes", nodes)
    if nodes > MAX_NODES:
        raise LayoutError(f"--nodes {nodes}: more instances than any cluster has (at most {MAX_NODES}); give the "
                          f"number of {chip.name} instances of the run")


@dataclass(frozen=True)
class Layout:
    chip: Chip
    nodes: int
    tp: int
    pp: int
    dp: int

    @classmethod
    def make(cls, chip: Chip, nodes: int, tp: int = 1, pp: int = 1, dp: int | None = None) -> "Layout":
        check_nodes(chip, nodes)
        for name, value in (("--tp", tp), ("--pp", pp)) + ((("--dp", dp),) if dp is not None else ()):
            _check_positive(name, value)
        world = nodes * chip.cores_per_instance
        if world % (tp * pp):
            raise LayoutError(f"{nodes} {chip.name} instance(s) have {world} NeuronCores, not a multiple of "
                              f"tp x pp = {tp * pp}")
        if dp is None:
            dp = world // (tp * pp)
        if tp * pp * dp > world:   # fewer is fine: the job leaves cores idle
            raise LayoutError(f"tp x pp x dp = {tp} x {pp} x {dp} = {tp * pp * dp} ranks, but {nodes} {chip.name} "
                              f"instance(s) have {world} NeuronCores ({chip.cores_per_instance} each); "
                              f"omit --dp to use every core (dp = {world // (tp * pp)})")
        return cls(chip, nodes, tp, pp, dp)

    @property
    def world(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def per_instance(self) -> int:
        return self.chip.cores_per_instance

    def tensor_group(self) -> Group:
        return Group(self.tp, min(self.tp, self.per_instance))

    def data_group(self) -> Group:
        on_one_instance = max(1, min(self.dp, self.per_instance // self.tp, self.world // self.nodes // self.tp))
        return Group(self.dp, on_one_instance, concurrent_groups=max(1, self.per_instance // on_one_instance))

    def stage_boundary_crosses_instances(self) -> bool:
        return self.tp * self.dp >= self.per_instance
