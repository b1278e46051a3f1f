"""Where in the user's code each costly event comes from: the innermost frames outside torch and the
libraries, counted per (category, what) and call site, for the portability report.

Cheap enough to stay on: a frame walk (a few microseconds) happens only on paths that are already slow
(Python routes: CPU fallbacks, float64 compute; host syncs; compiles), and whether a file is library
code is decided once per file.
"""
import os
import sys
import sysconfig
import threading
from collections import Counter, defaultdict

import torch

CPU_FALLBACK = "cpu_fallback"
SIXTY_FOUR_BIT = "64bit_downcast"
HOST_SYNC = "host_sync"
RECOMPILE = "recompile"
GRAPH_BREAK = "graph_break"
CATEGORIES = (CPU_FALLBACK, SIXTY_FOUR_BIT, HOST_SYNC, RECOMPILE, GRAPH_BREAK)

SITES_PER_EVENT = 2  # the innermost user frame and its caller

_LIBRARY_ROOTS = tuple(os.path.realpath(p) + os.sep for p in {
    os.path.dirname(torch.__file__),
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),  # localneuron
    os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "torch_neuronx"),
    sysconfig.get_paths()["stdlib"],
    sysconfig.get_paths()["purelib"],
    sysconfig.get_paths()["platlib"],
})

_library_file: dict[str, bool] = {}
_lock = threading.Lock()
_sites: dict[tuple[str, str], Counter] = defaultdict(Counter)


def is_library(filename: str) -> bool:
    known = _library_file.get(filename)
    if known is None:
        known = filename.startswith("<") or os.path.realpath(filename).startswith(_LIBRARY_ROOTS)
        _library_file[filename] = known
    return known


def user_site(frame) -> str | None:
    """'file:line in function' of the innermost user frames from `frame` outwards (caller last), or None
    if all of them are library code."""
    found = []
    while frame is not None and len(found) < SITES_PER_EVENT:
        code = frame.f_code
        if not is_library(code.co_filename):
            found.append((code, frame.f_lineno))
        frame = frame.f_back
    return site_name(found) if found else None


def site_name(frames: list[tuple]) -> str:
    """The name of a call site: its user frames as (code object, line), innermost first."""
    return " <- ".join(f"{code.co_filename}:{line} in {code.co_name}" for code, line in frames)


def record(category: str, what: str, site: str | None = None, count: int = 1) -> None:
    site = site or user_site(sys._getframe(1)) or "(library code only)"
    with _lock:
        _sites[(category, what)][site] += count


def snapshot() -> dict[str, dict[str, dict[str, int]]]:
    """category -> what -> {site: count}, most frequent first."""
    with _lock:
        out: dict = {c: {} for c in CATEGORIES}
        for (category, what), sites in _sites.items():
            out[category][what] = dict(sites.most_common())
    return out


def clear() -> None:
    with _lock:
        _sites.clear()
