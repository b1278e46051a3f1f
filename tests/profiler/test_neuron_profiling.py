"""torch_neuronx.profiling (docs/support-matrix.md#profiling): NeuronConfig / ProfileMode / NeuronProfiler.export_trace
with TorchNeuron's directory layout in open formats, and the NEURON_RT_INSPECT_* environment route."""
import csv
import json
import textwrap
from pathlib import Path

import pytest
import torch
from torch.profiler import ProfilerActivity, profile, schedule

from chrome_trace_check import check
from fresh_python import run_python
from localneuron.costmodel import work as device_work
from torch_neuronx.profiling import NeuronConfig, NeuronProfiler, ProfileMode

BOTH = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def only_dir(root: Path) -> Path:
    [instance] = list(root.iterdir())
    [stamp] = list(instance.iterdir())
    return stamp


def warm_model():
    model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 8)).to("neuron")
    x = torch.randn(32, 64, device="neuron")
    for _ in range(3):
        model(x).sum().backward()
    return model, x


def test_export_trace_writes_the_documented_layout_in_open_formats(tmp_path):
    model, x = warm_model()
    cfg = NeuronConfig(modes=list(ProfileMode), profile_output_dir=str(tmp_path))
    profiler = NeuronProfiler(cfg)
    with profile(activities=BOTH, experimental_config=cfg, schedule=schedule(wait=0, warmup=1, active=2, repeat=1),
                 on_trace_ready=profiler.export_trace, profile_memory=True) as prof:
        for _ in range(3):
            model(x).sum().backward()
            torch.neuron.synchronize()
            prof.step()
    out = only_dir(tmp_path)
    assert str(out) == profiler.last_output_dir
    instance = out.parent.name
    assert instance.endswith(f"_pid_{__import__('os').getpid()}")
    names = {p.name for p in out.iterdir()}
    assert {"trace.json", "system_profile.json", "summary.json", "ops.csv", "cpu_util.json", "host_mem.json"} <= names
    device_profiles = [n for n in names if n.startswith("device_profile_model_")]
    assert device_profiles
    for name in ["trace.json", "system_profile.json", *device_profiles]:
        assert check(json.loads((out / name).read_text())) == [], name
    system = json.loads((out / "system_profile.json").read_text())["traceEvents"]
    assert any(e.get("cat") == "neuron_rt" for e in system) and any(e.get("cat") == "neuron_hw" for e in system)
    assert any(e.get("ph") == "f" for e in system)  # runtime -> hardware arrows

    summary = json.loads((out / "summary.json").read_text())
    assert "not from a measurement" in summary["estimates"]
    assert [s["step"] for s in summary["steps"]] == ["step 0", "step 1"]
    for s in summary["steps"]:
        assert 0 < s["mfu"] <= 1 and s["hfu"] == s["mfu"] and 0 < s["mbu"]
        # layer 1: forward and weight gradient (x needs no gradient); layer 2: forward, input and weight gradients
        assert s["matmul_flops"] == 2 * (2 * 32 * 64 * 128 + 3 * 32 * 128 * 8)
    with open(out / "ops.csv") as f:
        rows = {r["op"]: r for r in csv.DictReader(f)}
    # linear runs whole (TorchNeuron's one op), not as t and addmm
    assert int(rows["aten::linear"]["calls"]) == 4 and float(rows["aten::linear"]["estimated_device_us"]) > 0
    assert "aten::addmm" not in rows
    memory = json.loads((out / "host_mem.json").read_text())
    assert memory["device"]["neuron:0"]["allocated_peak"] > 0
    counters = [e for e in system if e.get("ph") == "C"]  # device memory over time (profile_memory=True)
    assert len(counters) > 10 and len({c["args"]["allocated"] for c in counters}) > 1
    assert max(c["args"]["allocated"] for c in counters) <= memory["device"]["neuron:0"]["allocated_peak"]

    [mapping_file] = [n for n in names if n.startswith("framework_mapping_")]
    mapping = json.loads((out / mapping_file).read_text())["external_id_to_runtime"]
    linear = [m for m in mapping.values() if m["framework_op"] == "aten::linear"]
    assert len(linear) == 4
    for m in linear:
        [launch] = [r for r in m["runtime"] if r["name"] == "neuron_rt::execute"]
        assert launch["device"]["engine"] == device_work.TENSOR_E and launch["flow_id"]
    framework_ids = {e["args"]["External id"] for e in json.loads((out / "trace.json").read_text())["traceEvents"]
                     if e.get("cat") == "cpu_op" and e["name"] == "aten::linear"}
    assert {int(k) for k, m in mapping.items() if m["framework_op"] == "aten::linear"} == framework_ids
    pyarrow_parquet = pytest.importorskip("pyarrow.parquet", reason="Parquet is written only where pyarrow imports")
    table = pyarrow_parquet.read_table(out / "ops.parquet").to_pylist()
    assert {r["op"]: r["calls"] for r in table} == {op: int(r["calls"]) for op, r in rows.items()}


def test_modes_and_core_selection_limit_what_is_captured(tmp_path):
    model, x = warm_model()
    cfg = NeuronConfig(modes=[ProfileMode.RUNTIME], profile_output_dir=str(tmp_path))
    with profile(activities=BOTH, experimental_config=cfg, on_trace_ready=NeuronProfiler(cfg).export_trace) as prof:
        model(x)
    out = only_dir(tmp_path)
    assert not any(p.name.startswith("device_profile_model_") for p in out.iterdir())
    assert not (out / "cpu_util.json").exists()
    events = json.loads((out / "trace.json").read_text())["traceEvents"]  # a Kineto trace saves once
    assert not any(e.get("cat") == "kernel" for e in events)
    assert any(e.get("cat") == "privateuse1_runtime" for e in events)

    path = tmp_path / "t.json"
    cfg = NeuronConfig(capture_enabled_for_nc="1-3", profile_output_dir=str(tmp_path / "b"))
    with profile(activities=BOTH, experimental_config=cfg) as prof:
        model(x)
    prof.export_chrome_trace(str(path))
    assert not any(e.get("cat") == "kernel" for e in json.loads(path.read_text())["traceEvents"])  # core 0 only ran

    cfg = NeuronConfig(max_events_per_nc=2, profile_output_dir=str(tmp_path / "c"))
    with profile(activities=BOTH, experimental_config=cfg) as prof:
        model(x)
    prof.export_chrome_trace(str(path))
    assert sum(e.get("cat") == "kernel" for e in json.loads(path.read_text())["traceEvents"]) == 2


def test_bad_configuration_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match="ProfileMode"):
        NeuronConfig(modes=["DEVICE"])
    with pytest.raises(ValueError, match="positive integer"):
        NeuronConfig(max_events_per_nc=0)
    with pytest.raises(ValueError, match="'0,1,2-5'"):
        NeuronConfig(capture_enabled_for_nc="0,x")
    assert {m.name for m in ProfileMode} == {"DEVICE", "RUNTIME", "CPU_UTIL", "HOST_MEMORY"}


INSPECTED = textwrap.dedent("""
    import torch
    from torch.profiler import profile, ProfilerActivity
    x = torch.randn(16, 16, device="neuron")
    for _ in range(4):
        (x @ x).relu().sum().item()
    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            pass
    except RuntimeError as error:
        print("REFUSED:", str(error).splitlines()[0])
""")


def test_environment_route_writes_a_profile_at_exit_and_refuses_torch_profiler(tmp_path):
    result = run_python(INSPECTED, env={"NEURON_RT_INSPECT_ENABLE": "1", "NEURON_RT_INSPECT_OUTPUT_DIR": str(tmp_path),
                                        "NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP": "2"})
    assert result.returncode == 0, result.stderr
    assert "REFUSED:" in result.stdout and "NEURON_RT_INSPECT_ENABLE" in result.stdout
    out = only_dir(tmp_path)
    assert f"[Neuron] profile written to {out}" in result.stdout
    system = json.loads((out / "system_profile.json").read_text())
    assert check(system) == []
    mm = [e for e in system["traceEvents"] if e.get("cat") == "neuron_hw" and e["name"] == "aten::mm"]
    assert len(mm) == 1 and mm[0]["tid"] == device_work.TRACKS.index(device_work.TENSOR_E)  # model mode: the run after warm-up
    launches = [e for e in system["traceEvents"] if e.get("name") == "neuron_rt::execute" and e["args"]["op"] == "aten::mm"]
    assert len(launches) == 4

    session = run_python(INSPECTED, env={"NEURON_RT_INSPECT_ENABLE": "1", "NEURON_RT_INSPECT_OUTPUT_DIR": str(tmp_path / "s"),
                                         "NEURON_RT_INSPECT_DEVICE_PROFILE": "session",
                                         "NEURON_RT_INSPECT_SYSTEM_PROFILE": "0"})
    assert session.returncode == 0, session.stderr
    out = only_dir(tmp_path / "s")
    assert not (out / "system_profile.json").exists()
    mm_profiles = [json.loads(p.read_text())["traceEvents"] for p in out.glob("device_profile_model_*.json")]
    assert sum(1 for events in mm_profiles for e in events if e.get("name") == "aten::mm") == 4


def test_environment_route_rejects_bad_values_before_the_run(tmp_path):
    result = run_python("import torch", env={"NEURON_RT_INSPECT_ENABLE": "1", "NEURON_RT_INSPECT_DEVICE_PROFILE": "always"})
    assert "NEURON_RT_INSPECT_DEVICE_PROFILE='always'" in result.stderr


def allocated_here(n):
    return torch.empty(n, dtype=torch.uint8, device="neuron")  # ALLOCATION


def test_memory_history_snapshot_is_in_pytorch_memory_viz_format(tmp_path):
    import pickle

    from torch.cuda._memory_viz import trace_plot

    torch.neuron.memory._record_memory_history(max_entries=100000)
    try:
        kept = allocated_here(4 << 20)
        dropped = allocated_here(1000)
        del dropped
        torch.neuron.memory._dump_snapshot(str(tmp_path / "snapshot.pickle"))
    finally:
        torch.neuron.memory._record_memory_history(enabled=None)
    snapshot = pickle.loads((tmp_path / "snapshot.pickle").read_bytes())
    trace = snapshot["device_traces"][0]
    ours = [e for e in trace if e["action"] == "alloc" and e["size"] in (4 << 20, 1024)]
    assert [e["size"] for e in ours] == [4 << 20, 1024]
    assert any(f["name"] == "allocated_here" and f["filename"].endswith("test_neuron_profiling.py")
               for f in ours[0]["frames"])
    freed = [e for e in trace if e["action"] == "free_completed" and e["addr"] == ours[1]["addr"]]
    assert len(freed) == 1
    segment = next(s for s in snapshot["segments"] if s["address"] == ours[0]["addr"])
    assert segment["blocks"][0]["state"] == "active_allocated" and segment["total_size"] == 4 << 20
    assert kept.untyped_storage().data_ptr() == ours[0]["addr"]
    html = trace_plot(snapshot)  # PyTorch's own memory_viz renderer accepts it
    assert "<html" in html.lower() or "<script" in html.lower()
    with pytest.raises(ValueError, match="expected one of"):
        torch.neuron.memory._record_memory_history(enabled="everything")
