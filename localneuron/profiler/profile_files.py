"""The profile directory TorchNeuron's profiler writes (docs/output-files.md), in open formats:

    <output>/<instance>_pid_<pid>/<timestamp>/
        trace.json                       framework trace (torch.profiler's Chrome trace), when given
        system_profile.json              runtime and hardware layers, Chrome trace JSON (Perfetto opens it);
                                         replaces ntrace.pb + trace_info.pb
        device_profile_model_<id>.json   one per executable: its runs on the engine tracks; replaces
                                         neff_<hash>_vnc_<n>.neff + profile_nc_<n>_session_<k>.ntff
        framework_mapping_<timestamp>.json  with trace.json: each framework op -> the runtime and device
                                         events it caused (Neuron's framework_mapping file)
        summary.json                     per step: estimated MFU, HFU, MBU, device time (estimates)
        ops.csv, ops.parquet             per op: calls, host time, estimated device time, route (Parquet, as
                                         Neuron Explorer's default, when pyarrow is importable: the hf extra
                                         installs it; never a dependency of its own)
        cpu_util.json                    CPU_UTIL mode; replaces cpu_util.pb
        host_mem.json                    HOST_MEMORY mode; replaces host_mem.pb
"""
import csv
import io
import json
import os
import socket
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from localneuron import _C
from localneuron.costmodel.work import TRACKS
from localneuron.profiler import kineto_bridge, step_metrics
from localneuron.runtime.checked_files import OutputDirectory

FORMATS = {
    "system_profile.json": "Chrome trace event JSON (ui.perfetto.dev, chrome://tracing) instead of ntrace.pb/trace_info.pb",
    "device_profile_model_<id>.json": "Chrome trace event JSON per executable instead of NEFF + NTFF",
    "summary.json": "JSON; every time in it is an estimate of the simulated device",
    "ops.csv": "CSV; ops.parquet as well when pyarrow is importable (Neuron Explorer's tables are Parquet)",
    "framework_mapping_<timestamp>.json": "JSON: framework op (trace.json External id) -> runtime/device events",
    "memory counters": "device memory over time as Chrome trace counters in system_profile.json (profile_memory=True)",
    "cpu_util.json": "JSON instead of cpu_util.pb",
    "host_mem.json": "JSON instead of host_mem.pb",
}


def instance_name() -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in socket.gethostname()) or "localhost"


def directory_for(output: OutputDirectory) -> OutputDirectory:
    """<output>/<instance>_pid_<pid>/<timestamp>/, made this user's own below the checked output directory
    and used only through descriptors: neither can be another user's directory or a symlink."""
    stamp = time.strftime("%Y%m%d_%H%M%S") + f"_{time.time_ns() % 1_000_000_000:09d}"
    with output.subdirectory(f"{instance_name()}_pid_{os.getpid()}") as process:
        return process.subdirectory(stamp, exclusive=True)


def _us(ns: int) -> float:
    return ns / 1000.0


def _chrome_events(trace, spans, with_runtime: bool) -> list[dict]:
    events = []
    cores = sorted({s.core for s in spans})
    for core in cores:
        pid = kineto_bridge.hw_pid(core)
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"neuron_hw NC{core}"}})
        for i, track in enumerate(TRACKS):
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": i, "args": {"name": track}})
    flows = {s.flow for s in spans if s.flow}
    if with_runtime:
        for (_, name, pid, tid, start, end, corr, meta, flow, _) in trace.runtime:
            events.append({"ph": "X", "cat": "neuron_rt", "name": name, "pid": pid, "tid": tid, "ts": _us(start),
                           "dur": _us(end - start), "args": {k: json.loads(v) for k, v in meta.items()}})
            if flow in flows:
                events.append({"ph": "s", "cat": "ac2g", "name": "ac2g", "id": flow, "pid": pid, "tid": tid,
                               "ts": _us(start)})
    runtime_flows = {a[8] for a in trace.runtime} if with_runtime else set()
    track_id = {t: i for i, t in enumerate(TRACKS)}
    for s in sorted(spans, key=lambda s: (s.core, track_id[s.track], s.start_ns)):
        pid, tid = kineto_bridge.hw_pid(s.core), track_id[s.track]
        events.append({"ph": "X", "cat": "neuron_hw", "name": s.name, "pid": pid, "tid": tid, "ts": _us(s.start_ns),
                       "dur": _us(s.end_ns - s.start_ns), "args": s.details})
        if s.flow and s.flow in runtime_flows:
            events.append({"ph": "f", "cat": "ac2g", "name": "ac2g", "id": s.flow, "pid": pid, "tid": tid,
                           "ts": _us(s.start_ns), "bp": "e"})
    return events


def _write_json(directory: OutputDirectory, name: str, data) -> None:
    directory.write(name, json.dumps(data, indent=1, default=str) + "\n")


def _step_windows(step_starts_ns: list[int], trace) -> list[tuple[str, int, int]]:
    if not step_starts_ns:
        return [("trace", trace.start_ns, max(trace.end_ns, max((s.end_ns for s in trace.spans), default=0)))]
    starts = sorted(trace.host_clock.simulated(t) for t in step_starts_ns)  # device spans are on that clock
    bounds = starts + [max(trace.end_ns, max((s.end_ns for s in trace.spans), default=0))]
    return [(f"step {i}", bounds[i], bounds[i + 1]) for i in range(len(bounds) - 1)]


def _summary(trace, step_starts_ns) -> dict:
    steps = []
    for name, start, end in _step_windows(step_starts_ns, trace):
        spans = [s for s in trace.spans if start <= s.start_ns < end]
        window = (max(s.end_ns for s in spans) - min(s.start_ns for s in spans)) * 1e-9 if spans else 0.0
        busy = defaultdict(float)
        for s in spans:
            busy[s.track] += (s.end_ns - s.start_ns) * 1e-9
        steps.append({"step": name, **step_metrics.utilisation(spans, window),
                      "engine_busy_seconds": dict(busy)})
    return {"estimates": "every device time, FLOP rate and utilisation here comes from the cost model of the "
                         "simulated target, not from a measurement", "formats": FORMATS, "steps": steps}


def _ops_rows(trace) -> list[dict]:
    rows: dict = {}
    for (_, name, _pid, _tid, start, end, _corr, meta, _flow, _) in trace.runtime:
        if "op" not in meta or name == "neuron_rt::compile":
            continue
        op = json.loads(meta["op"])
        row = rows.setdefault(op, {"op": op, "calls": 0, "host_us": 0.0, "estimated_device_us": 0.0,
                                   "route": json.loads(meta.get("route", '""'))})
        row["calls"] += 1
        row["host_us"] += _us(end - start)
    for s in trace.spans:
        op = s.details.get("op")
        if op in rows:
            rows[op]["estimated_device_us"] += _us(s.end_ns - s.start_ns)
    return sorted(rows.values(), key=lambda r: -r["estimated_device_us"])


PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1, as torch.profiler writes it in "[memory]" events


def _framework_trace(export) -> bytes:
    """What export(path) writes (torch.profiler's Chrome trace), written first in a private temporary directory:
    it opens the path it is given, following links, so it never gets one in the output directory."""
    with tempfile.TemporaryDirectory(prefix="localneuron-trace-") as private:
        path = os.path.join(private, "trace.json")
        export(path)
        with open(path, "rb") as f:
            return f.read()


def _framework_events(data: bytes) -> list[dict]:
    try:
        return json.loads(data).get("traceEvents", [])
    except ValueError:
        return []  # no framework trace: the other files do not need it


def _memory_counters(framework: list[dict]) -> list[dict]:
    """Device memory over time (torch.profiler's "[memory]" events of profile_memory=True) as counters on
    each NeuronCore's process, the HBM usage track of Neuron's system profile."""
    counters = []
    for e in framework:
        args = e.get("args") or {}
        if e.get("name") == "[memory]" and args.get("Device Type") == PRIVATEUSE1:
            counters.append({"ph": "C", "name": "HBM usage (bytes)", "pid": kineto_bridge.hw_pid(args["Device Id"]),
                             "tid": 0, "ts": e["ts"], "args": {"allocated": args["Total Allocated"],
                                                               "reserved": args["Total Reserved"]}})
    return sorted(counters, key=lambda c: (c["pid"], c["ts"]))


def _framework_mapping(framework: list[dict], trace) -> dict:
    """framework op -> the runtime activities (and their device spans, by flow id) it issued."""
    ops = {e["args"]["External id"]: e for e in framework
           if e.get("cat") == "cpu_op" and "External id" in (e.get("args") or {})}
    spans = {s.flow: s for s in trace.spans if s.flow}
    mapping: dict = {}
    for (_, name, _pid, _tid, start, _end, correlation, meta, flow, _) in trace.runtime:
        op = ops.get(correlation)
        if op is None:
            continue
        entry = mapping.setdefault(correlation, {"framework_op": op["name"], "ts_us": op["ts"], "runtime": []})
        span = spans.get(flow)
        entry["runtime"].append({"name": name, "ts_us": _us(start), "flow_id": flow or None,
                                 "executable": json.loads(meta["executable"]) if "executable" in meta else None,
                                 "device": None if span is None else
                                 {"core": span.core, "engine": span.track, "ts_us": _us(span.start_ns)}})
    return {"external_id_to_runtime": mapping}


def _write_ops(directory: OutputDirectory, rows: list[dict]) -> None:
    fields = ["op", "calls", "host_us", "estimated_device_us", "route"]
    text = io.StringIO(newline="")
    writer = csv.DictWriter(text, fieldnames=fields)
    writer.writeheader()
    writer.writerows(rows)
    directory.write("ops.csv", text.getvalue())
    try:
        import pyarrow
        import pyarrow.parquet
    except ImportError:
        return  # CSV only: the hf extra brings pyarrow, nothing else needs it
    parquet = pyarrow.BufferOutputStream()
    pyarrow.parquet.write_table(pyarrow.table({k: [r[k] for r in rows] for k in fields}), parquet)
    directory.write("ops.parquet", parquet.getvalue().to_pybytes())


def _host_memory() -> dict:
    status = {}
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "VmSize"):
                status[key] = int(value.split()[0]) * 1024
    except OSError:
        pass  # not Linux: the device counters below still say what the device held
    devices = {f"neuron:{d}": _C.memory_counters(d) for d in range(_C.device_count())}
    return {"host_bytes": status, "device": devices}


def write(output: OutputDirectory, trace, framework_trace=None, step_starts_ns=(), cpu_util: dict | None = None) -> str:
    """Writes one profile directory for `trace` (kineto_bridge.LastTrace) in `output`; returns its path."""
    with directory_for(output) as profile:
        modes = trace.config.modes
        framework = []
        if framework_trace is not None:
            data = _framework_trace(framework_trace)
            profile.write("trace.json", data)
            framework = _framework_events(data)
            _write_json(profile, f"framework_mapping_{os.path.basename(profile.path)}.json",
                        _framework_mapping(framework, trace))
        if "RUNTIME" in modes:  # the system profile: runtime layer, with the hardware layer when DEVICE is on
            _write_json(profile, "system_profile.json", {"traceEvents": _chrome_events(trace, trace.spans, True)
                                                         + _memory_counters(framework), "displayTimeUnit": "ns"})
        if "DEVICE" in modes:
            by_executable = defaultdict(list)
            for s in trace.spans:
                by_executable[s.details.get("executable", s.name)].append(s)
            for key, spans in by_executable.items():
                safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in str(key))
                _write_json(profile, f"device_profile_model_{safe}.json",
                            {"traceEvents": _chrome_events(trace, spans, False), "displayTimeUnit": "ns"})
        _write_json(profile, "summary.json", _summary(trace, list(step_starts_ns)))
        _write_ops(profile, _ops_rows(trace))
        if "CPU_UTIL" in modes:
            _write_json(profile, "cpu_util.json", cpu_util or {})
        if "HOST_MEMORY" in modes:
            _write_json(profile, "host_mem.json", _host_memory())
        return profile.path
