"""A strict check of the Chrome trace event format (the JSON Perfetto and chrome://tracing load), for
the traces the neuron device exports."""
from collections import defaultdict

PHASES = {"X", "B", "E", "i", "I", "M", "s", "t", "f", "C", "b", "e", "n"}
METADATA_NAMES = {"process_name", "process_labels", "process_sort_index", "thread_name", "thread_sort_index"}


def check(trace: dict) -> list[str]:
    """Every problem found (empty: valid)."""
    problems = []
    events = trace.get("traceEvents")
    if not isinstance(events, list):
        return ["traceEvents is not a list"]
    last_start = {}
    flows = defaultdict(lambda: {"s": 0, "f": 0})
    for i, e in enumerate(events):
        where = f"event {i} ({e.get('name')!r})"
        ph = e.get("ph")
        if ph not in PHASES:
            problems.append(f"{where}: unknown phase {ph!r}")
            continue
        if "pid" not in e or "tid" not in e and ph != "M":
            problems.append(f"{where}: no pid/tid")
        if ph == "M":
            if e.get("name") not in METADATA_NAMES:
                problems.append(f"{where}: unknown metadata name")
            elif not isinstance(e.get("args"), dict) or not e["args"]:
                problems.append(f"{where}: metadata without args")
            continue
        if not isinstance(e.get("ts"), (int, float)):
            problems.append(f"{where}: ts missing or not a number")
            continue
        if ph == "X":
            if not isinstance(e.get("dur"), (int, float)) or e["dur"] < 0:
                problems.append(f"{where}: complete event without a non-negative dur")
            track = (e["pid"], e["tid"])
            if e.get("cat") in ("kernel", "gpu_memcpy", "privateuse1_runtime"):
                if e["ts"] < last_start.get(track, float("-inf")):
                    problems.append(f"{where}: starts before the previous event of its track {track}")
                last_start[track] = e["ts"]
        if ph in ("s", "f"):
            if "id" not in e or "cat" not in e:
                problems.append(f"{where}: flow event without id/cat")
                continue
            flows[(e["cat"], e["id"])][ph] += 1
            if ph == "f" and e.get("bp") != "e":
                problems.append(f"{where}: flow end not bound to its enclosing slice (bp)")
    for (cat, flow_id), count in flows.items():
        if count["s"] != 1 or count["f"] != 1:
            problems.append(f"flow {cat}/{flow_id}: {count['s']} starts, {count['f']} ends")
    return problems
