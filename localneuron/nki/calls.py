"""A process-wide record of kernel calls (name, estimated time, bottleneck engine), read by
the portability report and the profiler."""
import threading

_lock = threading.Lock()
_calls = []


def record(report):
    with _lock:
        _calls.append(report.as_record())


def kernel_calls():
    """Every kernel call so far, oldest first, as dicts (name, target, estimated_ns, bottleneck, ...)."""
    with _lock:
        return [dict(c) for c in _calls]


def clear_kernel_calls():
    with _lock:
        _calls.clear()
