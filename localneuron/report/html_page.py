"""`localneuron run --html FILE`: the portability report as one self-contained HTML page with SVG
charts (device memory over time against HBM capacity, estimated device time by op, fallbacks and host
syncs by call site, compile events). No script, font or style is fetched: the page opens offline."""
import html
import os
import time

from localneuron.report import portability
from localneuron.runtime import line_time
from localneuron.runtime.units import bytes_text

WIDTH, BAR_HEIGHT, LABEL_WIDTH = 760, 18, 330
COLOURS = {"bars": "#3b7dd8", "memory": "#2a9d5c", "capacity": "#c0392b", "fallback": "#d35400", "sync": "#8e44ad"}


def _bars(chart_id: str, title: str, rows: list[tuple[str, str, float]], unit: str, colour: str) -> str:
    """rows: (label, tooltip, value)"""
    if not rows:
        return f'<section><h2>{html.escape(title)}</h2><p class="none">none</p></section>'
    top = max(v for _, _, v in rows) or 1.0
    height = BAR_HEIGHT * len(rows) + 10
    parts = [f'<svg id="{chart_id}" class="chart" width="{WIDTH}" height="{height}" role="img" '
             f'aria-label="{html.escape(title)}">']
    for i, (label, tooltip, value) in enumerate(rows):
        y = i * BAR_HEIGHT + 4
        length = max(1.0, (WIDTH - LABEL_WIDTH - 90) * value / top)
        short = label if len(label) <= 52 else "..." + label[-49:]
        parts.append(f'<text x="{LABEL_WIDTH - 6}" y="{y + 13}" text-anchor="end">{html.escape(short)}</text>'
                     f'<rect class="bar" x="{LABEL_WIDTH}" y="{y}" width="{length:.1f}" height="{BAR_HEIGHT - 5}" '
                     f'fill="{colour}"><title>{html.escape(tooltip)}: {value:g} {unit}</title></rect>'
                     f'<text x="{LABEL_WIDTH + length + 4:.1f}" y="{y + 13}">{value:.3g} {unit}</text>')
    parts.append("</svg>")
    return f"<section><h2>{html.escape(title)}</h2>{''.join(parts)}</section>"


def _memory_chart(samples: list[dict], capacity: int) -> str:
    title = "Device memory over time (neuron:0) against HBM capacity"
    if len(samples) < 2 or not capacity:
        return f'<section><h2>{title}</h2><p class="none">no samples</p></section>'
    height, left, bottom = 220, 60, 30
    t0, t1 = samples[0]["t"], samples[-1]["t"]
    span = max(t1 - t0, 1e-9)
    peak = max(s["reserved"] for s in samples)
    # capacity is usually far above the run's use: draw it as a labelled line at the top when off-scale
    scale_top = max(peak * 1.2, 1)
    def x(t):
        return left + (WIDTH - left - 10) * (t - t0) / span
    def y(v):
        return 10 + (height - bottom - 10) * (1 - min(v, scale_top) / scale_top)
    allocated = " ".join(f"{x(s['t']):.1f},{y(s['allocated']):.1f}" for s in samples)
    reserved = " ".join(f"{x(s['t']):.1f},{y(s['reserved']):.1f}" for s in samples)
    share = 100.0 * peak / capacity
    capacity_note = (f"HBM capacity {bytes_text(capacity)} (off the scale: peak reserved is {share:.2f}%)"
                     if capacity > scale_top else f"HBM capacity {bytes_text(capacity)}")
    cap_y = y(capacity)
    return (f"<section><h2>{title}</h2>"
            f'<svg id="memory-chart" class="chart" width="{WIDTH}" height="{height}" role="img" aria-label="{title}">'
            f'<line x1="{left}" y1="{cap_y:.1f}" x2="{WIDTH - 10}" y2="{cap_y:.1f}" stroke="{COLOURS["capacity"]}" '
            f'stroke-dasharray="6 3"/><text x="{left + 4}" y="{cap_y + 14:.1f}" fill="{COLOURS["capacity"]}">'
            f"{html.escape(capacity_note)}</text>"
            f'<polyline class="series" points="{reserved}" fill="none" stroke="#999" stroke-width="1.5"/>'
            f'<polyline class="series" points="{allocated}" fill="none" stroke="{COLOURS["memory"]}" stroke-width="2"/>'
            f'<text x="{left}" y="{height - 8}">0 s</text><text x="{WIDTH - 60}" y="{height - 8}">{span:.2f} s</text>'
            f'<text x="4" y="14">{html.escape(bytes_text(scale_top))}</text></svg>'
            f'<p class="legend"><span style="color:{COLOURS["memory"]}">allocated</span>, '
            f'<span style="color:#999">reserved</span></p></section>')


def _short_site(site: str) -> str:
    """'/long/path/train.py:12 in step <- ...' -> 'train.py:12 in step' (the bar's tooltip keeps all of it)."""
    innermost = site.split(" <- ")[0]
    return os.path.basename(innermost.split(":")[0]) + innermost[len(innermost.split(":")[0]):]


def _site_rows(entries: dict) -> list[tuple[str, str, float]]:
    rows = [(f"{what.split(' (')[0]} @ {_short_site(site)}", f"{what} @ {site}", count)
            for what, sites in entries.items() for site, count in sites.items()]
    return sorted(rows, key=lambda r: -r[2])[:15]


def render(data: dict, memory_samples: list[dict]) -> str:
    capacity = data["memory"][0]["capacity_bytes"] if data["memory"] else 0
    estimates = [(op, op, seconds * 1e3) for op, seconds in list(data["estimated_device_seconds_by_op"].items())[:15]]
    by_line = [(_short_site(site) + (line_time.BACKWARD if site.endswith(line_time.BACKWARD) else ""), site,
                seconds * 1e3)
               for site, seconds in list(data.get("estimated_device_seconds_by_source_line", {}).items())[:15]]
    sources = data.get("sources", {})
    compile_data = data.get("compile") or {}
    compile_rows = [(g["graph"], f"{g['graph']} (compile cache {g['cache']})", g["compile_time_s"])
                    for g in compile_data.get("graphs", [])]
    text = html.escape(portability.render(data))
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'">
<title>localneuron portability report</title>
<style>
body {{ font: 14px/1.4 sans-serif; margin: 24px; color: #222; }}
h1 {{ font-size: 20px; }} h2 {{ font-size: 16px; margin-top: 28px; }}
svg.chart text {{ font-size: 11px; fill: #333; }} .none {{ color: #777; }}
pre {{ background: #f6f6f6; padding: 12px; overflow-x: auto; font-size: 12px; }}
</style></head><body>
<h1>localneuron portability report: simulated {html.escape(data['target'])}</h1>
<p>Generated {html.escape(time.strftime('%Y-%m-%d %H:%M:%S'))}. Device times are roofline estimates of the
simulated target, not measurements.</p>
{_memory_chart(memory_samples, capacity)}
{_bars("device-time-chart", "Estimated NeuronCore time by op (ms)", estimates, "ms", COLOURS["bars"])}
{_bars("source-line-chart", "Estimated NeuronCore time by source line (ms)", by_line, "ms", COLOURS["bars"])}
{_bars("fallback-chart", "CPU fallbacks by call site (calls)", _site_rows(sources.get("cpu_fallback", {})), "calls",
       COLOURS["fallback"])}
{_bars("sync-chart", "Blocking host syncs by call site", _site_rows(sources.get("host_sync", {})), "syncs",
       COLOURS["sync"])}
{_bars("compile-chart", "Compile events: time per compiled graph (s)", compile_rows, "s", COLOURS["bars"])}
{_bars("recompile-chart", "Recompiles by call site", _site_rows(sources.get("recompile", {})), "", COLOURS["fallback"])}
<h2>Full report</h2><pre id="report-text">{text}</pre>
</body></html>
"""
