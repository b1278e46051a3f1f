"""Compile progress on stderr, at two grains.

Per frame, always (as neuronx-cc logs it): a line when Dynamo hands a frame over (with a recompile's
cause and shapes) and one when it is ready, so a long first call is never silent; TORCH_NEURONX_LOG_LEVEL=0
silences it with the other [Neuron] messages.
Per graph, on a terminal only: while a graph compiles for longer than a moment, one live status line
says which graph, how long so far and how many graphs are done. Silent when stderr is not a terminal
(logs, CI) or LOCALNEURON_COMPILE_PROGRESS=0.
"""
import contextlib
import sys
import threading
import time

from localneuron.ops.tracking import log_level
from localneuron.runtime.environment import read

SHOW_AFTER_S = 2.0  # compiles shorter than this print nothing
REFRESH_S = 0.5

_done = 0
_lock = threading.Lock()


def _wanted() -> bool:
    setting = read("LOCALNEURON_COMPILE_PROGRESS")
    return sys.stderr.isatty() if setting is None else setting


@contextlib.contextmanager
def compiling(graph: str):
    global _done
    if not _wanted():
        yield
        with _lock:
            _done += 1
        return
    stop = threading.Event()
    start = time.monotonic()
    shown = threading.Event()

    def report():
        if stop.wait(SHOW_AFTER_S):
            return
        while True:
            sys.stderr.write(f"\r[Neuron] compiling {graph}: {time.monotonic() - start:5.1f} s "
                             f"({_done} graphs compiled, this one pending)")
            sys.stderr.flush()
            shown.set()
            if stop.wait(REFRESH_S):
                return

    thread = threading.Thread(target=report, name="neuron-compile-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        with _lock:
            _done += 1
        if shown.is_set():
            sys.stderr.write(f"\r[Neuron] compiled {graph} in {time.monotonic() - start:.1f} s ({_done} graphs "
                             "compiled)\n")
            sys.stderr.flush()


@contextlib.contextmanager
def frame(name: str, graph: str, recompiles: int, reason: str | None):
    if log_level() < 1:
        yield
        return
    cause = f", recompile {recompiles} of this frame: {reason}" if recompiles else ""
    print(f"[Neuron] Compiling {name} as {graph}{cause} ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    yield
    print(f"[Neuron] {graph} ready in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
