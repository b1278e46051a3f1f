"""What Adaptive Eager did, for the portability report and the profiler: each fused executable (its
ops and source lines, how often it ran, its estimated device time fused and as separate launches from
the cost model) and the C++ engine's counters (launches, ops fused, ops left unfused, failures)."""
import threading
from dataclasses import dataclass

from localneuron import _C
from localneuron.costmodel import ops as cost_ops
from localneuron.costmodel.work import DeviceWork
from localneuron.runtime.config import selected_target

_lock = threading.Lock()
_executables: list = []


@dataclass
class FusedExecutable:
    name: str
    ops: tuple[str, ...]
    lines: tuple[str, ...]
    fused_seconds: float    # estimated device time of one run, fused
    unfused_seconds: float  # the same ops launched one by one
    calls: int = 0          # runs through its Python wrapper
    program: object = None  # its C++ program (native.py), which counts the runs it made itself

    def runs(self) -> int:
        return self.calls + (self.program.launches if self.program is not None else 0)


def new_executable(fused: DeviceWork, graph_ops: list, lines: list, names: list) -> FusedExecutable:
    """fused: the fused launch as compile_host priced it (what the profiler's span shows); the same ops launched
    one by one are priced here, for the comparison only (they never run so)."""
    with _lock:
        record = FusedExecutable(f"adaptive_eager_{len(_executables)}", tuple(names), tuple(lines), fused.seconds,
                                 cost_ops.eager_sequence(selected_target(), graph_ops).total)
        _executables.append(record)
    return record


def executables() -> list[FusedExecutable]:
    with _lock:
        return [e for e in _executables if e.runs()]


def summary() -> dict:
    """Totals since the last reset(): fused launches, ops they ran, launches saved, estimated time."""
    counters = _C.fusion_counters()
    ran = executables()
    return {
        "fused_executables": len(ran),
        "fused_launches": counters["fused_launches"],
        "fused_ops": counters["fused_ops"],
        "ops_per_launch": counters["fused_ops"] / counters["fused_launches"] if counters["fused_launches"] else 0.0,
        "launches_saved": counters["fused_ops"] - counters["fused_launches"],
        "unfused_ops_in_runs": counters["unfused_ops"],
        # segments holding a matmul: one operator each for the trackers, each matmul run with its own kernel
        "matmul_runs": counters["matmul_runs"],
        "matmul_run_ops": counters["matmul_run_ops"],
        "compiles": counters["compiles"],
        "failures": counters["failures"],
        "last_failure": counters["last_failure"],
        "estimated_fused_seconds": sum(e.runs() * e.fused_seconds for e in ran),
        "estimated_unfused_seconds": sum(e.runs() * e.unfused_seconds for e in ran),
        "executables": [{"name": e.name, "ops": list(e.ops), "lines": list(e.lines), "calls": e.runs(),
                         "estimated_fused_seconds": e.fused_seconds, "estimated_unfused_seconds": e.unfused_seconds}
                        for e in ran],
    }


def reset() -> None:
    _C.reset_fusion_counters()
    with _lock:
        for e in _executables:
            e.calls = 0
            if e.program is not None:
                e.program.reset_launches()
