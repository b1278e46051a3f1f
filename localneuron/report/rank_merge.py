"""One portability report for a multi-process job: every rank writes its full report, rank 0 merges
them. Counts that agree across ranks are shown once; those that differ are listed per rank, so an op
is never listed twice and a rank that behaves differently stands out."""
import copy

# report sections that map an op to a number
COUNT_SECTIONS = ("native_ops", "native_ops_computed_in_32bit", "cpu_fallback_ops", "view_ops",
                  "estimated_device_seconds_by_op", "estimated_device_seconds_by_source_line")


def _section_differences(section: str, reports: list[dict]) -> list[str]:
    lines = []
    ops = sorted(set().union(*(r.get(section, {}) for r in reports)))
    for op in ops:
        values = [r.get(section, {}).get(op, 0) for r in reports]
        if len(set(values)) > 1:
            shown = ", ".join(f"rank {r['rank']}: {_number(v)}" for r, v in zip(reports, values))
            lines.append(f"    {section} {op}: {shown}")
    return lines


def _number(v) -> str:
    return f"{v * 1e3:.3f} ms" if isinstance(v, float) else str(v)


def merge(reports: list[dict]) -> tuple[dict, list[str]]:
    """(merged data, per-rank difference lines); merged counts are the largest any rank saw."""
    reports = sorted(reports, key=lambda r: r["rank"])
    merged = copy.deepcopy(reports[0])
    for section in COUNT_SECTIONS:
        ops = set().union(*(r.get(section, {}) for r in reports))
        merged[section] = dict(sorted(((op, max(r.get(section, {}).get(op, 0) for r in reports)) for op in ops),
                                      key=lambda kv: -kv[1]))
    merged["native_ops_not_in_support_table"] = sorted(
        set().union(*(r.get("native_ops_not_in_support_table", []) for r in reports)))
    merged["memory"] = [m for r in reports for m in r.get("memory", [])]
    merged["source_line_samples"] = max(r.get("source_line_samples", 0) for r in reports)
    for category, entries in merged.get("sources", {}).items():
        for what in set().union(*(r["sources"].get(category, {}) for r in reports)):
            sites: dict = {}
            for r in reports:
                for site, count in r["sources"].get(category, {}).get(what, {}).items():
                    sites[site] = sites.get(site, 0) + count
            entries[what] = dict(sorted(sites.items(), key=lambda kv: -kv[1]))
    differences = [line for section in COUNT_SECTIONS for line in _section_differences(section, reports)]
    for key in ("hits", "misses", "executables"):
        values = [r["executable_cache"][key] for r in reports]
        if len(set(values)) > 1:
            differences.append(f"    executable cache {key}: " + ", ".join(
                f"rank {r['rank']}: {v}" for r, v in zip(reports, values)))
    return merged, differences
