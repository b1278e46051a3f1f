"""Estimated time, split by what it is spent on; the parts always add up to the total."""
from dataclasses import dataclass, fields

PARTS = ("compute", "memory", "collectives", "launches", "pipeline_bubble", "host")


@dataclass
class Breakdown:
    compute: float = 0.0          # engines busy (TensorE, VectorE, ScalarE, GpSimd) and their dependency latency
    memory: float = 0.0           # HBM traffic beyond what the engines hide
    collectives: float = 0.0      # NeuronLink / EFA
    launches: float = 0.0         # executable launches, per-step runtime costs, a server's per-request costs
    pipeline_bubble: float = 0.0  # pipeline stages idle while the pipeline fills and drains
    host: float = 0.0             # CPU fallbacks: the host link both ways

    @property
    def total(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))

    def __add__(self, other: "Breakdown") -> "Breakdown":
        return Breakdown(*(getattr(self, p) + getattr(other, p) for p in PARTS))

    def scaled(self, factor: float) -> "Breakdown":
        return Breakdown(*(getattr(self, p) * factor for p in PARTS))

    def as_dict(self) -> dict:
        return {p: getattr(self, p) for p in PARTS}
