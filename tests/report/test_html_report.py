"""`localneuron run --html FILE`: a self-contained page whose charts render in a real browser (headless
Chromium from Debian's `chromium` package) with no console errors and no network requests."""
import json
import re
import subprocess
import sys
import textwrap
from html.parser import HTMLParser

import pytest

import headless_chromium

CHARTS = ("memory-chart", "device-time-chart", "source-line-chart", "fallback-chart", "sync-chart", "compile-chart")

JOB = """
    import torch
    x = torch.randn(64, 64, device="neuron")
    grow = []
    for step in range(6):
        y = torch.linalg.inv(x @ x.T + torch.eye(64, device="neuron"))
        grow.append(torch.empty(1 << 20, device="neuron"))
        loss = y.sum().item()
    g = torch.compile(lambda t: t * 2, backend="neuron")
    g(x)
"""


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids, self.external, self.scripts, self.bars = set(), [], 0, 0

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.add(attrs["id"])
        for name in ("src", "href", "xlink:href"):
            if name in attrs:
                self.external.append(attrs[name])
        self.scripts += tag == "script"
        self.bars += tag == "rect" and attrs.get("class") == "bar"


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("html")
    script = tmp / "job.py"
    script.write_text(textwrap.dedent(JOB))
    out = tmp / "report.html"
    r = subprocess.run([sys.executable, "-m", "localneuron.cli.main", "run", "--html", str(out), str(script)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return out


def test_the_page_is_self_contained_and_has_every_chart(page):
    text = page.read_text()
    parsed = Page()
    parsed.feed(text)
    assert set(CHARTS) <= parsed.ids and "report-text" in parsed.ids
    assert parsed.external == [] and parsed.scripts == 0
    assert not re.search(r"url\(|@import|https?://", text.split('<pre id="report-text">')[0])
    assert parsed.bars >= 3  # device time by op, fallbacks and syncs have data
    assert "aten::linalg_inv_ex" in text and "job.py:" in text
    points = re.search(r'<polyline class="series" points="([^"]+)" fill="none" stroke="#2a9d5c"', text).group(1)
    assert len(points.split()) >= 2


# After load: every chart is laid out with a non-empty box, and the bars and the memory series have length.
RENDERED = """JSON.stringify({
  charts: Object.fromEntries([...document.querySelectorAll("svg.chart")].map(
      svg => [svg.id, svg.getBoundingClientRect().width * svg.getBoundingClientRect().height])),
  bars: [...document.querySelectorAll("rect.bar")].filter(r => r.getBBox().width > 0).length,
  series: [...document.querySelectorAll("polyline.series")].map(p => p.getTotalLength()),
})"""


def test_charts_render_in_headless_chromium_without_errors_or_network(page, tmp_path):
    executable = headless_chromium.find()
    if executable is None:
        pytest.skip("no headless browser: scripts/setup.sh installs Debian's `chromium` where apt-get is usable "
                    "as root; elsewhere `apt-get install chromium`")
    browser = headless_chromium.Browser(executable, str(tmp_path / "chromium-profile"))
    try:
        session = browser.open(page.as_uri())
        rendered = json.loads(browser.evaluate(session, RENDERED))
        browser.screenshot(session, tmp_path / "html_report.png")
    finally:
        browser.close()
    complaints = [e for e in browser.seen(headless_chromium.CONSOLE_EVENTS)
                  if e["method"] != "Log.entryAdded" or e["params"]["entry"]["level"] in ("error", "warning")]
    assert complaints == []
    requests = [e["params"]["request"]["url"] for e in browser.seen([headless_chromium.REQUEST_EVENT])]
    assert requests == [page.as_uri()]  # the page itself, nothing else
    assert set(CHARTS) <= set(rendered["charts"]) and all(area > 0 for area in rendered["charts"].values())
    assert rendered["bars"] >= 3 and rendered["series"] and all(length > 0 for length in rendered["series"])
    shot = tmp_path / "html_report.png"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
