"""Estimated device time by the user's source line, for the portability report (on by default).

csrc/profiler/line_sampler.h samples the ops each thread issues on the axis of their estimated device time and
credits the time a sample stands for to the innermost user frame (and its caller) that issued the
work, in a table of its own that by_line() reads; compiled-graph launches, collectives and NKI
kernels, issued from Python, pass through note(). Work issued by the autograd engine's thread has no
Python caller: the C++ sampler hands it to _sample(), which credits the user line that called
backward(), marked as such.

It is fed when work is issued, so it sits in runtime/, below every layer that issues work; the report reads it.
"""
import sys
import threading
from collections import Counter

from localneuron import _C
from localneuron.runtime import call_sites
from localneuron.runtime.environment import given, read

SAMPLE_GAP_VAR = "LOCALNEURON_SOURCE_TIME_SAMPLE_NS"
BACKWARD = " (backward)"
NO_USER_LINE = "(no user line: library code only)"
_BACKWARD_ENTRY = "_engine_run_backward"  # torch/autograd/graph.py: the frame that waits for the engine

_lock = threading.Lock()
_credited_ns: Counter = Counter()


def _backward_caller() -> str | None:
    """The user line whose backward() the autograd engine is running (the thread waiting in it)."""
    others = sys._current_frames()
    # this thread's own frame would be a local of itself: a cycle that keeps every caller's locals (the
    # user's activations) alive until the garbage collector runs
    others.pop(threading.get_ident(), None)
    for frame in others.values():
        walk = frame
        while walk is not None and walk.f_code.co_name != _BACKWARD_ENTRY:
            walk = walk.f_back
        site = call_sites.user_site(walk) if walk is not None else None
        if site is not None:
            return site + BACKWARD
    return None


def credit(credited_ns: int, issuer) -> None:
    """issuer: the innermost Python frame of the thread that issued the work, None on a thread without
    Python frames (the autograd engine's)."""
    site = call_sites.user_site(issuer) if issuer is not None else None
    site = site or _backward_caller() or NO_USER_LINE
    with _lock:
        _credited_ns[site] += credited_ns


def _sample(credited_ns: int) -> None:
    credit(credited_ns, sys._getframe(0).f_back)


def note(seconds: float) -> None:
    """Device work issued from Python (graph launch, collective, NKI kernel) with its estimated time."""
    _C.note_device_time(int(seconds * 1e9))


def bounded_cost() -> bool:
    """A gap set explicitly is kept as given; the default one widens where samples are costly (line_sampler.h)."""
    return given(SAMPLE_GAP_VAR) is None


def install() -> None:
    _C.set_line_sampler(_sample, read(SAMPLE_GAP_VAR), bounded_cost())


def uninstall() -> None:
    _C.set_line_sampler(None, 0, False)


def mean_gap_ns() -> int:
    return read(SAMPLE_GAP_VAR)


def sample_count() -> int:
    return _C.line_sample_count()


def by_line() -> dict[str, float]:
    """user line -> estimated device seconds credited to it, most first."""
    with _lock:
        credited = Counter(_credited_ns)
    for code, line, caller, caller_line, ns in _C.line_samples(clear=False):
        credited[call_sites.site_name([(code, line)] + ([(caller, caller_line)] if caller is not None else []))] += ns
    return {site: ns * 1e-9 for site, ns in credited.most_common()}


def clear() -> None:
    with _lock:
        _credited_ns.clear()
        _C.line_samples(clear=True)
