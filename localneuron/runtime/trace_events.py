"""Device work that Python issues (compiled-graph launches, collectives, NKI kernels), noted while a
torch.profiler trace with ProfilerActivity.PrivateUse1 records, so that the trace shows it next to
the eager executables the C++ executor notes. Nothing is kept when no trace records."""
import threading
from dataclasses import dataclass, field

from localneuron import _C
from localneuron.costmodel.work import DeviceWork


@dataclass
class PythonWork:
    kind: str                 # "graph" | "collective" | "nki"
    name: str
    device: int
    start_ns: int
    end_ns: int
    work: DeviceWork          # what it costs on the simulated device, priced when it was issued
    correlation: int          # the framework op (or user scope) it ran in
    thread: int
    details: dict = field(default_factory=dict)
    seen_ns: int = 0          # a collective: when the host saw it complete (0: not while recording)


_lock = threading.Lock()
_work: list[PythonWork] = []


def recording() -> bool:
    return _C.trace_recording()


def now_ns() -> int:
    return _C.trace_clock_ns()


def record(work: DeviceWork, device: int, start_ns: int, **details) -> PythonWork:
    """Note work that started at start_ns (trace clock) and ends now; callers check recording() first."""
    noted = PythonWork(work.kind, work.name, device, start_ns, _C.trace_clock_ns(), work,
                       _C.current_correlation_id(), threading.get_native_id(), details)
    with _lock:
        _work.append(noted)
    return noted


def seen(work: PythonWork) -> None:
    """The host has seen the collective `work` complete (it may read the result from now on)."""
    if recording() and not work.seen_ns:
        work.seen_ns = _C.trace_clock_ns()


def take() -> list[PythonWork]:
    with _lock:
        taken = list(_work)
        _work.clear()
    return taken

