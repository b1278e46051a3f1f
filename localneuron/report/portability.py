"""The portability report: what a run would do on Trainium (ops on the device, CPU fallbacks, 64-bit
downcasts, device memory against capacity, executable-cache behaviour), plus the sections of the
compile, distributed and NKI layers when the run used them. collect() builds the data once; render()
and to_json() are its text and JSON views (html_page.py is the HTML one)."""
import json

from localneuron import _C
from localneuron.ops import tracking
from localneuron.report import sources
from localneuron.runtime import line_time, report_sections
from localneuron.runtime.config import device_config
from localneuron.runtime.units import bytes_text

# the order the layers' sections are collected and printed in; a section registered under another name
# (runtime/report_sections.py) comes after these, in the order registered
SECTION_ORDER = ("compile", "distributed", "nki", "huggingface", "vllm", "adaptive_eager")


def _used_layers() -> list[report_sections.Section]:
    """The sections of the layers the run used: each layer registers its own when it is first used."""
    rank = {name: i for i, name in enumerate(SECTION_ORDER)}
    return sorted(report_sections.registered(), key=lambda s: rank.get(s.name, len(SECTION_ORDER)))


def collect() -> dict:
    config = device_config()
    counts = tracking.op_counts()
    hits, misses, executables = _C.executor_counters()
    memory = []
    for index in range(_C.device_count()):
        c = _C.memory_counters(index)
        if c["alloc_requests"]:
            memory.append({"device": f"neuron:{index}", "peak_allocated_bytes": c["allocated_peak"],
                           "peak_reserved_bytes": c["reserved_peak"], "capacity_bytes": c["capacity"],
                           "out_of_memory_errors": c["ooms"]})
    data = {
        "target": config.target.name,
        "lnc": config.target.lnc,
        "visible_cores": len(config.visible_cores),
        "native_ops": dict(counts[tracking.NATIVE].most_common()),
        "native_ops_computed_in_32bit": dict(counts[tracking.NATIVE_32BIT].most_common()),
        "cpu_fallback_ops": dict(counts[tracking.FALLBACK].most_common()),
        "view_ops": dict(counts[tracking.VIEW].most_common()),
        "native_ops_not_in_support_table": tracking.unlisted_native_ops(),
        "estimated_device_seconds_by_op": tracking.estimated_device_seconds(),
        "estimated_compiled_seconds_of_eager_ops": tracking.estimated_compiled_seconds(),
        "memory": memory,
        "executable_cache": {"hits": hits, "misses": misses, "executables": executables},
        "cross_device_errors": dict(_C.cross_device_errors()),
        "transfers": _C.transfer_counters(),
        "sources": sources.collect(),
        "estimated_device_seconds_by_source_line": line_time.by_line(),
        "source_line_sample_gap_ns": line_time.mean_gap_ns(),
        "source_line_samples": line_time.sample_count(),
    }
    for section in _used_layers():
        data[section.name] = section.collect()
    data["estimated_device_seconds"] = _device_time(data)
    return data


def _device_time(data: dict) -> dict:
    """The run's estimated NeuronCore time by where it goes, and what compiling the eager ops would give."""
    eager = sum(data["estimated_device_seconds_by_op"].values())
    parts = {
        "compiled_graphs": sum(g["estimated_seconds"]
                               for g in data.get("compile", {}).get("estimated_device_seconds_by_graph", {}).values()),
        "collectives": data.get("distributed", {}).get("total", {}).get("estimated_seconds", 0.0),
        "nki_kernels": data.get("nki", {}).get("estimated_ns", 0.0) * 1e-9,
    }
    rest = sum(parts.values())
    return {"eager_ops": eager, **parts, "total": eager + rest,
            "as_compiled_graphs": data["estimated_compiled_seconds_of_eager_ops"] + rest}


def _op_lines(title: str, ops: dict, limit: int = 25) -> list[str]:
    lines = [f"{title}: {len(ops)} ops, {sum(ops.values())} calls"]
    for op, calls in list(ops.items())[:limit]:
        lines.append(f"    {op:<44} {calls:>9}")
    if len(ops) > limit:
        lines.append(f"    ... and {len(ops) - limit} more (see --json)")
    return lines


def _source_line_lines(data: dict, limit: int = 8) -> list[str]:
    by_line = data.get("estimated_device_seconds_by_source_line") or {}
    if not by_line:
        return []
    gap, samples = data["source_line_sample_gap_ns"], data.get("source_line_samples", 0)
    how = "every op" if gap == 0 else f"sampled, one sample per {gap / 1e3:g} us of device time on average"
    taken = sum(by_line.values()) * 1e9 / samples if gap and samples else gap
    if taken > 1.5 * gap:
        how += (f"; {samples} samples, one per {taken / 1e3:.3g} us: the gap widens under deep Python stacks to "
                f"keep sampling under 0.5% of the time")
    lines = [f"    by source line ({how}):"]
    lines += [f"        {seconds * 1e3:9.3f} ms  {site}" for site, seconds in list(by_line.items())[:limit]]
    if len(by_line) > limit:
        lines.append(f"        ... {len(by_line) - limit} more lines (see --json)")
    return lines


def render(data: dict) -> str:
    lines = ["", "=" * 72, f"localneuron portability report (simulated {data['target']} at LNC={data['lnc']}, "
             f"{data['visible_cores']} NeuronCores visible)", "=" * 72]
    lines += _op_lines("Ran natively on the NeuronCore", data["native_ops"])
    if data["native_ops_computed_in_32bit"]:
        lines += _op_lines("64-bit tensors computed in 32-bit (float64->float32, int64->int32)",
                           data["native_ops_computed_in_32bit"])
    if data["cpu_fallback_ops"]:
        lines += _op_lines("CPU FALLBACKS (slow on Trainium: inputs copied to the host and back)",
                           data["cpu_fallback_ops"])
    else:
        lines.append("CPU fallbacks: none")
    unlisted = data["native_ops_not_in_support_table"]
    if unlisted:
        lines.append(f"Assumed native but not confirmed by the support table ({len(unlisted)}): "
                     + ", ".join(unlisted[:12]) + (" ..." if len(unlisted) > 12 else ""))
    cross = data["cross_device_errors"]
    if cross:
        lines += _op_lines("OPERANDS ON TWO NEURONCORES (raised, as CUDA does for two GPUs)", cross)
    device = data["estimated_device_seconds"]
    if device["total"]:
        shared = ", ".join(f"{name.replace('_', ' ')} {device[name] * 1e3:.2f} ms"
                           for name in ("compiled_graphs", "collectives", "nki_kernels") if device[name])
        lines.append(f"Estimated device time (cost model, not a measurement): eager {device['total'] * 1e3:.2f} ms, "
                     f"as compiled graphs {device['as_compiled_graphs'] * 1e3:.2f} ms"
                     + (f" (both include {shared})" if shared else ""))
    estimates = data["estimated_device_seconds_by_op"]
    if estimates:
        top = ", ".join(f"{op} {seconds * 1e3:.2f} ms" for op, seconds in list(estimates.items())[:5])
        lines.append(f"    eager ops: {device['eager_ops'] * 1e3:.2f} ms; most: {top}")
    lines += _source_line_lines(data)
    for m in data["memory"]:
        share = 100.0 * m["peak_reserved_bytes"] / m["capacity_bytes"]
        lines.append(f"Peak device memory on {m['device']}: {bytes_text(m['peak_allocated_bytes'])} allocated, "
                     f"{bytes_text(m['peak_reserved_bytes'])} reserved of {bytes_text(m['capacity_bytes'])} HBM "
                     f"({share:.1f}%)" + (f", {m['out_of_memory_errors']} OUT-OF-MEMORY errors"
                                          if m["out_of_memory_errors"] else ""))
    cache = data["executable_cache"]
    lines.append(f"Executable cache: {cache['misses']} compiled (misses), {cache['hits']} hits, "
                 f"{cache['executables']} executables")
    t = data["transfers"]
    lines.append(f"Host<->device transfers: {bytes_text(t['host_to_device_bytes'])} to the device, "
                 f"{bytes_text(t['device_to_host_bytes'])} back to the host")
    for section in _used_layers():
        if section.name in data:  # a layer first used after collect() has no data in this report
            lines += section.render(data[section.name])
    lines += sources.render(data["sources"])
    if "ranks_merged" in data:
        lines.append(f"Merged report of ranks {data['ranks_merged']} (counts: the largest any rank saw)")
        if data.get("ranks_missing_note"):
            lines.append(f"    {data['ranks_missing_note']}")
        differences = data["rank_differences"]
        lines.append("Per-rank differences:" if differences else "Per-rank differences: none (every rank ran the "
                     "same ops the same number of times)")
        lines += differences
    lines.append("=" * 72)
    return "\n".join(lines)


def to_json(data: dict) -> str:
    """The data as `localneuron run --json` and the rank and vLLM report files write it; a value JSON has no
    type for (a vLLM section may hold one) is written as its text."""
    return json.dumps(data, indent=2, sort_keys=True, default=str)
