"""The persistent compile cache: shared across processes, checked on load, switchable off; and the
compilation artifacts kept in TorchNeuron's debug-directory layout."""
import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch_neuronx

from localneuron.compiler import report

# Runs in a fresh process: compiles a forward and backward, prints the cache result of each graph.
CHILD = textwrap.dedent("""
    import json, torch, torch_neuronx
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.Tanh()).to("neuron")
    torch.compile(model, backend="neuron")(torch.randn(3, 6, device="neuron")).sum().backward()
    print(json.dumps([[g.kind, g.cache, g.cache_misses] for g in torch_neuronx.get_dynamo_metrics()]))
""")


def kernel_files(cache_dir) -> set:
    return {os.path.join(d, f) for d, _, files in os.walk(cache_dir) for f in files if f.endswith(".so")}


def entries(cache_dir) -> list:
    return sorted(os.path.join(d, f) for d, _, files in os.walk(cache_dir) for f in files if f.endswith(".entry"))


def start_child(tmp_path) -> subprocess.Popen:
    env = {**os.environ, "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "cache"),
           "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": str(tmp_path / "locks")}
    return subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def child_result(child: subprocess.Popen) -> list:
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def test_second_process_loads_every_graph_from_the_cache_without_code_generation(tmp_path):
    assert child_result(start_child(tmp_path)) == [["forward", "miss", 1], ["backward", "miss", 1]]
    kernels = kernel_files(tmp_path / "cache")
    assert child_result(start_child(tmp_path)) == [["forward", "hit", 0], ["backward", "hit", 0]]
    assert kernel_files(tmp_path / "cache") == kernels  # nothing was built the second time


def test_processes_compiling_the_same_graphs_at_once_build_each_only_once(tmp_path):
    children = [start_child(tmp_path), start_child(tmp_path)]
    results = [child_result(child) for child in children]
    statuses = sorted(status for result in results for _, status, _ in result)
    assert statuses == ["hit", "hit", "miss", "miss"]  # the lock holder builds, the other one loads
    assert len(entries(tmp_path / "cache")) == 2


@pytest.fixture
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", str(tmp_path / "locks"))
    torch_neuronx.reset_dynamo_metrics()
    torch._dynamo.reset()
    return tmp_path / "cache"


def compile_and_run(fn, x):
    torch._dynamo.reset()
    return torch.compile(fn, backend="neuron")(x.to("neuron")).cpu()


def double_plus_one(x):
    return x * 2 + 1


@pytest.mark.parametrize("damage", ["truncate", "flip a byte"])
def test_corrupt_entry_is_reported_and_rebuilt_never_loaded(private_cache, damage):
    x = torch.randn(5)
    compile_and_run(double_plus_one, x)
    (entry,) = entries(private_cache)
    data = open(entry, "rb").read()
    data = data[: len(data) // 2] if damage == "truncate" else data[:-10] + bytes([data[-10] ^ 0xFF]) + data[-9:]
    open(entry, "wb").write(data)

    with pytest.warns(UserWarning, match="is corrupt"):
        out = compile_and_run(double_plus_one, x)
    torch.testing.assert_close(out, x * 2 + 1)
    assert [g.cache for g in torch_neuronx.get_dynamo_metrics()] == ["miss", "miss"]
    assert report.collect()["corrupt_cache_entries"] == 1
    compile_and_run(double_plus_one, x)  # the rebuilt entry loads
    assert torch_neuronx.get_dynamo_metrics()[-1].cache == "hit"


def test_disabled_cache_compiles_every_time_and_stores_nothing(private_cache, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")
    compile_and_run(double_plus_one, torch.randn(5))
    assert [g.cache for g in torch_neuronx.get_dynamo_metrics()] == ["disabled"]
    assert entries(private_cache) == []


def test_preserved_artifacts_follow_the_debug_dir_layout(private_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(tmp_path / "debug"))
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    torch._dynamo.reset()
    torch.compile(double_plus_one, backend="neuron", options={"model_name": "tiny"})(torch.randn(5, device="neuron"))
    for directory, suffix in [("fx_graphs", ".fx.txt"), ("raw", ".host.py"), ("neff", ".neff")]:
        (name,) = os.listdir(tmp_path / "debug" / directory / "proc_0")
        assert name.startswith("tiny_") and name.endswith(suffix)
    (lowered,) = os.listdir(tmp_path / "debug" / "raw" / "proc_0")
    assert "cpp_fused" in open(tmp_path / "debug" / "raw" / "proc_0" / lowered).read()


@pytest.mark.parametrize("value", ["soon", "-1", "nan", "inf"])
def test_unusable_lock_timeout_warns_and_keeps_the_default(private_cache, monkeypatch, value):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", value)
    with pytest.warns(UserWarning, match=f"TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT='{value}' is not valid: expected a "
                                         "number of seconds >= 0. Using the default 600"):
        out = compile_and_run(double_plus_one, torch.ones(3))
    torch.testing.assert_close(out, torch.full((3,), 3.0))
