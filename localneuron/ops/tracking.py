"""What ran where: one record per compiled executable, counts from the C++ executor, warnings once.

TorchNeuron's trackers (get_executed_ops / get_fallback_ops) hold unique op names; the portability
report also wants per-op call counts, which come from the executor's per-executable counters.
"""
import threading
import warnings
from collections import Counter
from dataclasses import dataclass

from localneuron import _C
from localneuron.costmodel.work import DeviceWork
from localneuron.runtime import line_time
from localneuron.runtime.environment import read

NATIVE = "native"
NATIVE_32BIT = "native (64-bit computed in 32-bit)"
FALLBACK = "cpu_fallback"
VIEW = "view"


@dataclass
class Executable:
    op: str          # "aten::add"
    overload: str    # "Tensor"
    kind: str
    listed: bool     # whether the support table names the op (False: assumed native)
    signature: str
    work: DeviceWork | None  # what one call costs on the simulated target, priced at the first (None: a view)
    estimated_compiled_seconds: float  # per call, were it part of a compiled graph

    @property
    def estimated_seconds(self) -> float:
        return self.work.seconds if self.work is not None else 0.0


_lock = threading.Lock()
_executables: list[Executable] = []
_fallback_after_failure: Counter = Counter()
_warned: set[str] = set()


def register(executable: Executable) -> int:
    with _lock:
        _executables.append(executable)
        return len(_executables) - 1


def executable(executable_id: int) -> Executable:
    return _executables[executable_id]


def mark_fallback(executable_id: int) -> None:
    """A device execution failed and the host ran the op instead: account it as a fallback from now on."""
    _executables[executable_id].kind = FALLBACK


def op_counts() -> dict[str, Counter]:
    """kind -> Counter(op name -> calls) since the last clear_op_tracking()."""
    counts: dict[str, Counter] = {NATIVE: Counter(), NATIVE_32BIT: Counter(), FALLBACK: Counter(), VIEW: Counter()}
    for executable_id, calls in _C.executable_calls():
        e = _executables[executable_id]
        counts[e.kind][e.op] += calls
    return counts


def estimated_device_seconds() -> dict[str, float]:
    """op name -> estimated NeuronCore seconds over all its calls since the last clear_op_tracking()."""
    totals: Counter = Counter()
    for executable_id, calls in _C.executable_calls():
        e = _executables[executable_id]
        totals[e.op] += calls * e.estimated_seconds
    return dict(totals.most_common())


def estimated_compiled_seconds() -> float:
    """What the same eager calls would cost as parts of compiled graphs (no launches, intermediates in SBUF)."""
    return sum(calls * _executables[executable_id].estimated_compiled_seconds
               for executable_id, calls in _C.executable_calls())


def unlisted_native_ops() -> list[str]:
    ran = {op for kind in (NATIVE, NATIVE_32BIT) for op in op_counts()[kind]}
    return sorted(e.op for e in _executables if not e.listed and e.op in ran)


def get_executed_ops() -> list[str]:
    counts = op_counts()
    return sorted(set(counts[NATIVE]) | set(counts[NATIVE_32BIT]))


def get_fallback_ops() -> list[str]:
    return sorted(op_counts()[FALLBACK])


def clear_op_tracking() -> None:
    _C.reset_executable_calls()
    line_time.clear()  # the time by source line covers the same calls as the per-op counts
    _C.reset_cross_device_errors()


def log_level() -> int:
    return read("TORCH_NEURONX_LOG_LEVEL")


def warned(key: str) -> bool:
    return key in _warned


def warn_once(key: str, message: str) -> None:
    if key in _warned:
        return
    _warned.add(key)
    if log_level() >= 1:
        warnings.warn(f"[Neuron] [WARNING] {message}", UserWarning, stacklevel=3)
