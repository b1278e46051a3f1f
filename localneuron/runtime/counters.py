"""torch_neuronx.metrics: TorchNeuron's runtime counters and timed samples, for the compilation cache.

TorchNeuron (its source snapshot: torch_neuronx/metrics.py over csrc/core/metrics) keeps named counters and named
series of samples, collected only while metrics are enabled (TORCH_NEURONX_METRICS_ENABLED at start-up, default off;
set_enabled() at run time), and fed by its compilation cache. Here the same names count the same events:

- CompilationCache.InMemoryHits / InMemoryMisses: an eager op's call finds (or does not find) the executable built for
  its signature in the process's cache (the executor's own counters, csrc/executor/executable_cache.cpp);
- CompilationCache.PersistentHits / PersistentMisses: a compiled graph's piece found in (or missing from) the
  persistent cache on disk (TORCH_NEURONX_NEFF_CACHE_DIR);
- CompilationCache.TotalCompilations: executables built (for each eager miss whose build succeeded, for each graph
  piece compiled with or without the persistent cache);
- CompilationCache.CompilationTime: one sample per compilation, in nanoseconds of this host's time (simulated
  compilations are this process's work, not neuronx-cc's).

Nothing here evicts cached executables, so TorchNeuron's Evictions counter never has data. A counter has data once it is
non-zero; a series once it holds a sample. Counts are those made while enabled: the executor's counters run always,
so each enabled period adds what they moved during it.
"""
import threading
import time

from localneuron import _C
from localneuron.runtime.environment import read
from localneuron.runtime.units import seconds_text

HITS, MISSES = "CompilationCache.InMemoryHits", "CompilationCache.InMemoryMisses"
PERSISTENT_HITS, PERSISTENT_MISSES = "CompilationCache.PersistentHits", "CompilationCache.PersistentMisses"
COMPILATIONS, COMPILATION_TIME = "CompilationCache.TotalCompilations", "CompilationCache.CompilationTime"
MAX_SAMPLES = 1024  # a series keeps its newest samples; its accumulator and count keep everything


def _executor_totals() -> dict[str, int]:
    hits, misses, _ = _C.executor_counters()
    return {HITS: hits, MISSES: misses}


class _Series:
    def __init__(self):
        self.accumulator, self.total, self.samples = 0.0, 0, []

    def add(self, value: float) -> None:
        self.accumulator += value
        self.total += 1
        self.samples.append({"timestamp_ns": time.time_ns(), "value": value})
        del self.samples[:-MAX_SAMPLES]


class _Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        # TORCH_NEURONX_METRICS_ENABLED is read when first needed (a bad value raises there, not at import), and then
        # counts from start-up: from the executor's totals as they were when this module was imported
        self._switch: bool | None = None
        self._counted: dict[str, int] = {}           # counters this module increments, and the executor's carried
        self._base = _executor_totals()              # the executor's totals when this period began
        self._series: dict[str, _Series] = {}

    @property
    def _enabled(self) -> bool:
        if self._switch is None:
            self._switch = read("TORCH_NEURONX_METRICS_ENABLED")
        return self._switch

    def _executor_moved(self) -> dict[str, int]:
        if not self._enabled:
            return {}
        now = _executor_totals()
        return {name: now[name] - self._base.get(name, now[name]) for name in now}

    def counters(self) -> dict[str, int]:
        with self._lock:
            values = dict(self._counted)
            for name, n in self._executor_moved().items():
                values[name] = values.get(name, 0) + n
            return {name: value for name, value in values.items() if value}

    def set_enabled(self, enabled: bool) -> None:
        with self._lock:
            if enabled == self._enabled:
                return
            if enabled:
                self._base = _executor_totals()
            else:  # the period ends: what the executor's counters moved during it stays counted
                for name, moved in self._executor_moved().items():
                    self._counted[name] = self._counted.get(name, 0) + moved
            self._switch = enabled

    def is_enabled(self) -> bool:
        return self._enabled

    def count(self, name: str, n: int = 1) -> None:
        if self._enabled:
            with self._lock:
                self._counted[name] = self._counted.get(name, 0) + n

    def sample(self, name: str, value: float) -> None:
        if self._enabled:
            with self._lock:
                self._series.setdefault(name, _Series()).add(value)

    def series(self) -> dict[str, dict]:
        with self._lock:
            return {name: {"accumulator": s.accumulator, "total_samples": s.total, "repr": _text(name, s.accumulator),
                           "samples": [dict(x) for x in s.samples]}
                    for name, s in self._series.items() if s.total}

    def clear_counters(self) -> None:
        with self._lock:
            self._counted.clear()
            self._base = _executor_totals()

    def clear_series(self) -> None:
        with self._lock:
            self._series.clear()


def _text(name: str, value: float) -> str:
    return seconds_text(value * 1e-9) if name == COMPILATION_TIME else f"{value:g}"


_metrics = _Metrics()


# -- what the layers report (each a no-op while metrics are disabled) --

def eager_compiled(nanoseconds: int) -> None:
    """An eager op's executable was built for a new signature (its miss is the executor's own count; a call whose
    build raised is a miss and no compilation)."""
    _metrics.count(COMPILATIONS)
    _metrics.sample(COMPILATION_TIME, nanoseconds)


def graph_piece(cached: bool | None, nanoseconds: int) -> None:
    """A compiled graph's piece: found in the persistent cache (True), compiled and stored (False), or compiled with
    the cache disabled (None)."""
    if cached:
        _metrics.count(PERSISTENT_HITS)
        return
    if cached is not None:
        _metrics.count(PERSISTENT_MISSES)
    _metrics.count(COMPILATIONS)
    _metrics.sample(COMPILATION_TIME, nanoseconds)


# -- torch_neuronx.metrics --

def is_enabled() -> bool:
    return _metrics.is_enabled()


def set_enabled(enabled: bool) -> None:
    if not isinstance(enabled, bool):
        raise TypeError(f"set_enabled() takes True or False, not {enabled!r}")
    _metrics.set_enabled(enabled)


def get_counter_names() -> list[str]:
    return sorted(_metrics.counters())


def get_counter_value(name: str) -> int | None:
    return _metrics.counters().get(name)


def get_metric_names() -> list[str]:
    return sorted(_metrics.series())


def get_metric_data(name: str) -> dict | None:
    """{"accumulator", "total_samples", "repr" (the accumulator, readable), "samples": [{"timestamp_ns", "value"}]}."""
    return _metrics.series().get(name)


def _report(title: str, counters: dict[str, int], series: dict[str, dict]) -> str:
    lines = [f"=== {title} ==="]
    for name, data in series.items():
        values = [s["value"] for s in data["samples"]]
        lines += [f"Metric: {name}", f"  TotalSamples: {data['total_samples']}", f"  Accumulator: {data['repr']}"]
        if values:
            lines += [f"  Mean: {_text(name, sum(values) / len(values))}", f"  Min: {_text(name, min(values))}",
                      f"  Max: {_text(name, max(values))}"]
        lines.append("")
    for name, value in counters.items():
        lines += [f"Counter: {name}", f"  Value: {value}", ""]
    return "\n".join(lines) + "\n"


def report() -> str:
    """Every series with samples and every counter with data, as text."""
    return _report("Neuron Metrics Report", dict(sorted(_metrics.counters().items())),
                   dict(sorted(_metrics.series().items())))


def report_filtered(counter_names: list[str] | None = None, metric_names: list[str] | None = None) -> str:
    """The named counters and series only (those with data), in the order given."""
    counters, series = _metrics.counters(), _metrics.series()
    return _report("Neuron Metrics Report (Filtered)",
                   {n: counters[n] for n in counter_names or [] if n in counters},
                   {n: series[n] for n in metric_names or [] if n in series})


def clear_counters() -> None:
    _metrics.clear_counters()


def clear_metrics() -> None:
    _metrics.clear_series()


def clear_all() -> None:
    clear_counters()
    clear_metrics()


def get_compilation_metrics() -> dict:
    """The compilation counters by name, and each compilation series as {"accumulator", "total_samples",
    "formatted"}."""
    result: dict = {name: value for name, value in sorted(_metrics.counters().items()) if "Compilation" in name}
    for name, data in sorted(_metrics.series().items()):
        if "Compilation" in name:
            result[name] = {"accumulator": data["accumulator"], "total_samples": data["total_samples"],
                            "formatted": data["repr"]}
    return result
