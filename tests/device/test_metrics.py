"""torch_neuronx.metrics: the compilation cache's counters and compile-time samples, collected only while enabled
(TORCH_NEURONX_METRICS_ENABLED at start-up, set_enabled() at run time), as TorchNeuron keeps them."""
import itertools
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch

import torch_neuronx.metrics as met

MISSES, HITS = "CompilationCache.InMemoryMisses", "CompilationCache.InMemoryHits"
COMPILATIONS, TIME = "CompilationCache.TotalCompilations", "CompilationCache.CompilationTime"
_sizes = itertools.count(1009)


def new_signature() -> torch.Tensor:
    """A tensor of a length no other call has used: an op on it is a new signature, so a cache miss."""
    return torch.ones(next(_sizes), device="neuron")


@pytest.fixture
def metrics():
    met.set_enabled(True)
    met.clear_all()
    yield met
    met.set_enabled(False)
    met.clear_all()


def test_disabled_by_default_nothing_is_counted():
    assert not met.is_enabled()
    met.clear_all()
    (new_signature() * 2).cpu()
    assert met.get_counter_names() == [] and met.get_metric_names() == []
    assert met.get_counter_value(MISSES) is None and met.get_metric_data(TIME) is None
    assert met.get_compilation_metrics() == {}
    assert "Counter:" not in met.report()


def test_a_new_signature_is_a_miss_and_a_compilation_and_its_repeat_a_hit(metrics):
    x = new_signature()  # the factory's own signature: one miss
    assert metrics.get_counter_value(MISSES) == 1 and metrics.get_counter_value(COMPILATIONS) == 1
    (x + 1).cpu()
    (x + 1).cpu()
    assert metrics.get_counter_value(MISSES) == 2 and metrics.get_counter_value(HITS) >= 1
    data = metrics.get_metric_data(TIME)
    assert data["total_samples"] == metrics.get_counter_value(COMPILATIONS) == 2
    assert data["accumulator"] == pytest.approx(sum(s["value"] for s in data["samples"])) and data["accumulator"] > 0
    assert all(s["timestamp_ns"] > 0 for s in data["samples"]) and data["repr"].endswith("s")
    compiled = metrics.get_compilation_metrics()
    assert compiled[MISSES] == 2 and compiled[TIME]["total_samples"] == 2 and compiled[TIME]["formatted"]
    assert set(metrics.get_counter_names()) >= {MISSES, HITS, COMPILATIONS}


def test_only_enabled_periods_count_and_a_period_keeps_its_counts(metrics):
    new_signature()
    metrics.set_enabled(False)
    for _ in range(3):
        new_signature()  # three misses while disabled: not counted
    assert metrics.get_counter_value(MISSES) == 1
    metrics.set_enabled(True)
    new_signature()
    assert metrics.get_counter_value(MISSES) == 2 and metrics.get_metric_data(TIME)["total_samples"] == 2


def test_clearing_counters_and_samples_separately(metrics):
    new_signature()
    metrics.clear_counters()
    assert metrics.get_counter_names() == [] and metrics.get_metric_names() == [TIME]
    new_signature()
    assert metrics.get_counter_value(MISSES) == 1
    metrics.clear_metrics()
    assert metrics.get_metric_names() == [] and metrics.get_counter_value(MISSES) == 1
    metrics.clear_all()
    assert metrics.get_counter_names() == [] == metrics.get_metric_names()


def test_reports_name_what_has_data(metrics):
    new_signature()
    full = metrics.report()
    assert f"Counter: {MISSES}\n  Value: 1" in full and f"Metric: {TIME}" in full and "Mean:" in full
    filtered = metrics.report_filtered(counter_names=[MISSES, "CompilationCache.Evictions"])
    assert MISSES in filtered and TIME not in filtered and "Evictions" not in filtered  # no data, not shown
    assert metrics.report_filtered().count("Counter:") == 0


def test_set_enabled_takes_a_bool():
    with pytest.raises(TypeError, match="True or False"):
        met.set_enabled("yes")


CHILD = textwrap.dedent("""
    import json, torch, torch_neuronx
    import torch_neuronx.metrics as met
    enabled = met.is_enabled()
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh()).to("neuron")
    torch.compile(model, backend="neuron")(torch.randn(3, 6, device="neuron")).sum().backward()
    names = ("CompilationCache.PersistentHits", "CompilationCache.PersistentMisses")
    print(json.dumps([enabled] + [met.get_counter_value(name) for name in names]))
""")


def run_child(tmp_path, value: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TORCH_NEURONX_METRICS_ENABLED": value, "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "c"),
           "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": str(tmp_path / "locks")}
    return subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)


def test_enabled_at_start_up_the_persistent_cache_counts_graph_misses_then_hits(tmp_path):
    first = run_child(tmp_path, "1")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout.splitlines()[-1]) == [True, None, 2]  # forward and backward compiled and stored
    second = run_child(tmp_path, "yes")
    assert json.loads(second.stdout.splitlines()[-1]) == [True, 2, None]  # both loaded from disk


def test_a_bad_start_up_value_is_refused_with_the_variable_named(tmp_path):
    child = run_child(tmp_path, "sometimes")
    assert child.returncode != 0 and "TORCH_NEURONX_METRICS_ENABLED='sometimes' is not valid" in child.stderr
