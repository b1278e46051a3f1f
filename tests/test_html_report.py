"""`localneuron run --html FILE`: a self-contained page whose charts render in a real browser (headless
Chromium from Debian's `chromium` package) with no console errors and no network requests."""
import os
import re
import shutil
import subprocess
import sys
import textwrap
from html.parser import HTMLParser
from pathlib import Path

import pytest

ARTIFACTS = Path(os.environ.get("LOCALNEURON_TEST_ARTIFACTS", "/tmp/localneuron-test-artifacts"))
CHARTS = ("memory-chart", "device-time-chart", "fallback-chart", "sync-chart", "compile-chart")

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


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_charts_render_in_headless_chromium_without_errors_or_network(page):
    browser = _chromium()
    if browser is None:
        pytest.skip("no headless browser: `apt-get install chromium` (Debian) provides one")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    common = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--enable-logging=stderr", "--v=0",
              "--host-resolver-rules=MAP * ~NOTFOUND", "--disable-background-networking", "--no-first-run",
              f"--user-data-dir={ARTIFACTS / 'chromium-profile'}"]
    dom = subprocess.run([*common, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    for chart in CHARTS:
        assert f'id="{chart}"' in dom.stdout  # the browser parsed and kept every chart
    assert dom.stdout.count('class="bar"') >= 3
    console = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console == []
    network = [line for line in dom.stderr.splitlines() if "net::ERR" in line or "ERR_NAME_NOT_RESOLVED" in line]
    assert network == []  # every name resolves to NOTFOUND, so any request would have failed here
    shot = ARTIFACTS / "html_report.png"
    r = subprocess.run([*common, f"--screenshot={shot}", "--window-size=900,1400", page.as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.stat().st_size > 10_000, r.stderr[-2000:]
