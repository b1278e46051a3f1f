"""The NKI section of the portability report: kernel calls with their estimated device time."""
from collections import defaultdict

from localneuron.runtime import report_sections

from .calls import kernel_calls


def collect():
    per_kernel = defaultdict(lambda: {"calls": 0, "estimated_ns": 0.0, "bottlenecks": defaultdict(int)})
    calls = kernel_calls()
    for call in calls:
        entry = per_kernel[call["name"]]
        entry["calls"] += 1
        entry["estimated_ns"] += call["estimated_ns"]
        entry["bottlenecks"][call["bottleneck"]] += 1
    kernels = {name: {"calls": e["calls"], "estimated_ns": e["estimated_ns"],
                      "bottleneck": max(e["bottlenecks"], key=e["bottlenecks"].get)}
               for name, e in per_kernel.items()}
    return {"calls": len(calls), "estimated_ns": sum(c["estimated_ns"] for c in calls), "kernels": kernels}


def render(data):
    if not data["calls"]:
        return ["NKI kernels: none called"]
    lines = [f"NKI kernels: {data['calls']} calls, estimated {data['estimated_ns'] / 1000:.1f} us of "
             f"NeuronCore time (cycle-model estimate)"]
    for name, k in sorted(data["kernels"].items(), key=lambda item: -item[1]["estimated_ns"]):
        lines.append(f"    {name:<36} {k['calls']:>6} calls {k['estimated_ns'] / 1000:>12.1f} us  "
                     f"bottleneck {k['bottleneck']}")
    return lines


report_sections.register("nki", collect, render)  # the section is in the report once this layer is used
