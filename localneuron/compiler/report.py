"""The compile section of the portability report (`localneuron run`): graphs compiled, graph breaks
with their reasons, static-shape recompiles with the shapes that caused them, compile time and cache use.

Only metrics.py is imported here, so a report on a run that compiled nothing does not load Dynamo or Inductor."""
import sys
from collections import Counter

from localneuron.compiler import metrics
from localneuron.runtime import report_sections


def _graph_breaks() -> dict[str, int]:
    if "torch._dynamo" not in sys.modules:  # nothing was compiled; do not import Dynamo to find that out
        return {}
    from torch._dynamo.utils import counters

    breaks = Counter()
    for reason, count in counters["graph_break"].items():
        breaks[reason.strip().splitlines()[0]] += count  # the first line names the break; the rest is advice
    return dict(breaks.most_common())


def collect() -> dict:
    from localneuron.compiler import device_time  # imported when the report is built: the package's import stays cheap

    graphs = metrics.graphs()
    splits = Counter(op for g in graphs for op in g.eager_ops)
    return {
        "graphs_compiled": len(graphs),
        "dynamo_graphs": len({g.compile_id for g in graphs}),
        "compile_time_s": sum(g.compile_time_s for g in graphs),
        "cache": {status: sum(g.cache == status for g in graphs) for status in ("hit", "miss", "disabled")},
        "corrupt_cache_entries": len(metrics.corrupt_cache_entries()),
        "graph_breaks": _graph_breaks(),
        "eager_op_splits": dict(splits.most_common()),
        "recompiles": [{"frame": f.name, **r} for f in metrics.frames().values() for r in f.recompiles],
        "recompiled_frames": [{"frame": f.name, "graphs": f.compiles, "lengths": f.lengths()}
                              for f in metrics.frames().values() if f.recompiles],
        "failures": metrics.failures(),
        "estimated_device_seconds_by_graph": device_time.estimated_seconds(),
        "graphs": [{"graph": g.graph, "kind": g.kind, "frame": g.frame, "nodes": g.node_count,
                    "compile_time_s": round(g.compile_time_s, 3), "cache": g.cache, "pieces": g.pieces}
                   for g in graphs],
    }


def render(data: dict) -> list[str]:
    if not data["graphs_compiled"] and not data["failures"]:
        return []  # torch.compile(backend="neuron") was not used
    cache = data["cache"]
    lines = [f"torch.compile(backend='neuron'): {data['graphs_compiled']} graphs compiled from "
             f"{data['dynamo_graphs']} Dynamo graphs in {data['compile_time_s']:.1f} s; compile cache "
             f"{cache['hit']} hits, {cache['miss']} misses" + (f", {cache['disabled']} uncached" if cache["disabled"]
                                                               else "")
             + (f", {data['corrupt_cache_entries']} corrupt entries rebuilt" if data["corrupt_cache_entries"] else "")]
    breaks = data["graph_breaks"]
    lines.append(f"Graph breaks: {sum(breaks.values())}" if breaks else "Graph breaks: none")
    for reason, count in breaks.items():
        lines.append(f"    {count:>4} x {reason}")
    for op, count in data["eager_op_splits"].items():
        lines.append(f"    split {count:>3} graph(s) at {op} (runs eagerly between compiled pieces)")
    recompiles = data["recompiles"]
    lines.append(f"Recompiles (static shapes: one graph per input shape): {len(recompiles)}" if recompiles
                 else "Recompiles: none")
    for f in data["recompiled_frames"]:
        lengths = f" for lengths {', '.join(map(str, f['lengths']))}" if f["lengths"] else ""
        lines.append(f"    {f['frame']}: {f['graphs']} graphs{lengths} (pad inputs to a few bucket lengths to "
                     "bound them)")
    for r in recompiles:
        lines.append(f"    {r['frame']} [{r['compile_id']}]: {r['reason']}")
    estimates = data["estimated_device_seconds_by_graph"]
    if estimates:
        total = sum(g["estimated_seconds"] for g in estimates.values())
        calls = sum(g["calls"] for g in estimates.values())
        lines.append(f"Estimated NeuronCore time of the compiled graphs (cost model, not a measurement): "
                     f"{total * 1e3:.2f} ms over {calls} calls")
    for f in data["failures"]:
        lines.append(f"COMPILE FAILURE in {f['frame']}: {f['error']}"
                     + (" (ran eagerly instead)" if f["ran_eagerly"] else ""))
    return lines


report_sections.register("compile", collect, render)  # the section is in the report once this layer is used
