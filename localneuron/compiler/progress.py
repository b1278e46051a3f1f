"""Compile progress on stderr, as neuronx-cc shows it: a line when a graph starts compiling (with the
recompile's cause and shapes) and one when it is ready, so a long first call is never silent.
TORCH_NEURONX_LOG_LEVEL=0 silences it with the other [Neuron] messages."""
import sys
import time
from contextlib import contextmanager

from localneuron.ops.tracking import log_level


@contextmanager
def compiling(frame: str, graph: str, recompiles: int, reason: str | None):
    if log_level() < 1:
        yield
        return
    cause = f", recompile {recompiles} of this frame: {reason}" if recompiles else ""
    print(f"[Neuron] Compiling {frame} as {graph}{cause} ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    yield
    print(f"[Neuron] {graph} ready in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
