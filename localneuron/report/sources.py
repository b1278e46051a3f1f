"""The report section that names the user's source lines behind each CPU fallback, 64-bit downcast,
graph break, recompile and blocking host sync (runtime/call_sites.py records them as they happen;
graph breaks come from Dynamo's own record of the user stack)."""
import sys
from collections import Counter

from localneuron.runtime import call_sites

TITLES = {
    call_sites.CPU_FALLBACK: "CPU fallbacks by call site (queued ones, ops/queueing.py: first call per signature)",
    call_sites.SIXTY_FOUR_BIT: "64-bit downcasts by call site (int64 on the device route: first call per signature)",
    call_sites.GRAPH_BREAK: "Graph breaks by call site",
    call_sites.RECOMPILE: "Recompiles by call site",
    call_sites.HOST_SYNC: "Blocking host syncs by call site (each one drains the device queue on Trainium)",
}
SITES_SHOWN = 3


def _graph_breaks() -> dict[str, dict[str, int]]:
    if "torch._dynamo" not in sys.modules:
        return {}
    from torch._dynamo.utils import graph_break_reasons

    breaks: dict[str, Counter] = {}
    for r in graph_break_reasons:
        user = [f for f in r.user_stack if not call_sites.is_library(f.filename)]
        site = f"{user[-1].filename}:{user[-1].lineno} in {user[-1].name}" if user else "(library code only)"
        breaks.setdefault(r.reason.strip().splitlines()[0], Counter())[site] += 1
    return {reason: dict(sites.most_common()) for reason, sites in breaks.items()}


def collect() -> dict:
    data = call_sites.snapshot()
    data[call_sites.GRAPH_BREAK] = _graph_breaks()
    return data


def render(data: dict) -> list[str]:
    lines = []
    for category, title in TITLES.items():
        entries = data.get(category) or {}
        if not entries:
            continue
        total = sum(sum(sites.values()) for sites in entries.values())
        lines.append(f"{title}: {total}")
        for what, sites in sorted(entries.items(), key=lambda kv: -sum(kv[1].values())):
            lines.append(f"    {what}: {sum(sites.values())}")
            for site, count in list(sites.items())[:SITES_SHOWN]:
                lines.append(f"        {count:>7} x {site}")
            if len(sites) > SITES_SHOWN:
                lines.append(f"        ... {len(sites) - SITES_SHOWN} more call sites (see --json)")
    return lines
