"""The portability report's Adaptive Eager section (present once a run was compiled)."""
from localneuron.adaptive_eager import stats
from localneuron.runtime import report_sections


def collect() -> dict:
    return stats.summary()


def render(data: dict) -> list[str]:
    lines = [f"Adaptive Eager: {data['fused_executables']} fused executables ran {data['fused_launches']} times for "
             f"{data['fused_ops']} ops ({data['ops_per_launch']:.1f} ops per launch, {data['launches_saved']} launches "
             f"saved); {data['unfused_ops_in_runs']} queued fusible ops ran unfused (short or first-seen runs)",
             f"    {data['matmul_runs']} runs with matmuls ran as one operator each for {data['matmul_run_ops']} ops "
             f"(matmuls with their own kernels; tracked under the ops' names joined by '|')",
             f"    estimated device time of the fused ops (cost model): {data['estimated_fused_seconds'] * 1e3:.3f} ms "
             f"fused, {data['estimated_unfused_seconds'] * 1e3:.3f} ms as separate launches"]
    for e in sorted(data["executables"], key=lambda e: -e["calls"])[:5]:
        where = next((line for line in e["lines"] if line), "")
        lines.append(f"    {e['name']}: {len(e['ops'])} ops ({', '.join(dict.fromkeys(e['ops']))}), "
                     f"{e['calls']} runs{where}")
    if data["failures"]:
        lines.append(f"    FUSION FAILURES: {data['failures']} (those runs ran unfused); last: {data['last_failure']}")
    return lines


report_sections.register("adaptive_eager", collect, render)  # the section is in the report once this layer is used
