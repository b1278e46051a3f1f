"""Per-process counters of the collectives the `neuron` process groups issued: how many of each kind,
how many bytes, and how long they took. The portability report (`report.py`) reads them."""
import threading
from collections import defaultdict
from dataclasses import dataclass


@dataclass
class KindStats:
    calls: int = 0
    bytes: int = 0
    seconds: float = 0.0
    estimated_seconds: float = 0.0   # on the simulated Trainium (cost model)


_lock = threading.Lock()  # collectives are issued from the main thread and from autograd threads (DDP hooks)
_by_kind: dict[str, KindStats] = defaultdict(KindStats)


def record_issue(kind: str, nbytes: int, estimated_seconds: float) -> None:
    with _lock:
        entry = _by_kind[kind]
        entry.calls += 1
        entry.bytes += nbytes
        entry.estimated_seconds += estimated_seconds


def record_time(kind: str, seconds: float) -> None:
    with _lock:
        _by_kind[kind].seconds += seconds


def snapshot() -> dict[str, KindStats]:
    with _lock:
        return {kind: KindStats(s.calls, s.bytes, s.seconds, s.estimated_seconds) for kind, s in _by_kind.items()}


def reset() -> None:
    with _lock:
        _by_kind.clear()
