"""How long CI takes, phase by phase: clones the repository's HEAD into a fresh folder, runs `bash .ci/run` there
as CI does (CI=true, no standard input), reads the "== phase NAME: N s" lines scripts/test.sh prints, and writes
the table between the markers in docs/contributing.md (date, commit, processor, each phase, the whole run).

Run it by hand, alone on an otherwise idle machine (it is a timing; the suite's multi-process tests also slow
down on a busy one):
    python3 benchmarks/ci_phases.py [--keep]          (--keep: leave the clone in place afterwards)

A failed run is reported and the page is left as it was. The clone installs itself as CI does (the editable
install then points at the clone): set up this checkout again afterwards with `bash scripts/setup.sh`.
"""
import argparse
import datetime
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "contributing.md"
BEGIN, END = "<!-- ci-phases: begin (benchmarks/ci_phases.py writes this table) -->", "<!-- ci-phases: end -->"
PHASE = re.compile(r"^== phase (?P<name>.+): (?P<seconds>\d+) s$")
# how many cores were busy while a phase ran (the whole machine's CPU time over the phase's wall time)
BUSY = re.compile(r"^== busy (?P<name>.+): (?P<cores>[\d.]+) of (?P<of>\d+) cores$")
# pytest's closing line, e.g. "2890 passed, 66 skipped, 6 xfailed in 601.23s (0:10:01)"
CLOSING = re.compile(r"^=*\s*(?P<counts>\d+ passed.*?) in [\d.]+s")


def processor() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores"


def run_ci(clone: Path) -> tuple[int, list[str], float]:
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    started = time.monotonic()
    done = subprocess.run(["bash", ".ci/run"], cwd=clone, env={**os.environ, "CI": "true"}, stdin=subprocess.DEVNULL,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return done.returncode, done.stdout.splitlines(), time.monotonic() - started


def phases(lines: list[str]) -> tuple[list[tuple[str, int, str]], dict[str, str]]:
    """(phase, seconds, the counts of the pytest run that closed in it) in the order they ran, and how many cores
    were busy in each phase (and while the extras' tests ran side by side)."""
    found, busy, counts = [], {}, ""
    for line in lines:
        closing = CLOSING.match(line.strip())
        if closing:
            counts = closing["counts"]
        match = PHASE.match(line.strip())
        if match:
            found.append((match["name"], int(match["seconds"]), counts))
            counts = ""
        cores = BUSY.match(line.strip())
        if cores:
            busy[cores["name"]] = f"{cores['cores']} of {cores['of']}"
    return found, busy


def table(found: list, busy: dict, total: float, commit: str) -> str:
    rows = [f"Fresh clone, `bash .ci/run` (CI=true), {datetime.date.today().isoformat()}, commit {commit}, "
            f"{processor()}:", "", "| phase | time | cores busy | tests |", "|---|---:|---:|---|"]
    rows += [f"| {name} | {seconds // 60} min {seconds % 60:02d} s | {busy.get(name, '')} | {counts} |"
             for name, seconds, counts in found]
    if "extras side by side" in busy:
        rows.append(f"| (extras' tests, side by side) | | {busy['extras side by side']} | |")
    rows.append(f"| **whole run** | **{int(total) // 60} min {int(total) % 60:02d} s** | | |")
    return "\n".join(rows)


def write_page(text: str) -> None:
    page = PAGE.read_text()
    if BEGIN not in page or END not in page:
        raise SystemExit(f"{PAGE} has no {BEGIN!r} ... {END!r} markers to write the table between")
    head, rest = page.split(BEGIN, 1)
    PAGE.write_text(f"{head}{BEGIN}\n{text}\n{END}{rest.split(END, 1)[1]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="leave the clone in place")
    args = parser.parse_args()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=True).stdout.strip()
    folder = Path(tempfile.mkdtemp(prefix="localneuron-ci-"))
    try:
        status, lines, total = run_ci(folder / "clone")
        (folder / "ci.log").write_text("\n".join(lines) + "\n")
        found, busy = phases(lines)
        print("\n".join(f"{name}: {seconds} s, {busy.get(name, '?')} cores busy  {counts}"
                         for name, seconds, counts in found))
        print(f"whole run: {total:.0f} s, exit status {status} (log: {folder / 'ci.log'})")
        if status != 0:
            print("CI failed: the page is left as it was", file=sys.stderr)
            return 1
        write_page(table(found, busy, total, commit))
        print(f"wrote the table into {PAGE}")
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(folder / "clone", ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
