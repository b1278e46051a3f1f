"""Runs TorchNeuron's own test suite, unchanged, against this checkout of localneuron and counts what passes.

The suite is third-party test data (Apache-2.0), from the public repository github.com/aws-neuron/torch-neuronx;
the project expects it in third_party/torch-neuronx-tests of the shared folder beside the checkout (--tree says
otherwise). It is copied to a temporary folder first, so the run writes nothing into it (no caches, no bytecode,
no reports). Each test file runs in a pytest process of its own, with a time limit: one file that hangs or crashes the
interpreter costs only its own tests, and a hung file is killed with every process it started. Each mode runs the
whole selection: asynchronous (TorchNeuron's default, NEURON_LAUNCH_BLOCKING=0) and blocking (=1).

    python3 benchmarks/torchneuron_suite.py [--tree PATH] [--mode async|blocking|both] [--only DIR ...]
                                            [--files FILE ...] [--jobs N] [--timeout SECONDS] [--out outcomes.json]

Prints, per mode, a table per directory of tests/ (passed / failed / error / skipped / total, pass rate) and the
commonest failure messages; --out writes every test's outcome as JSON. A file that hangs, crashes or leaves no
readable report counts as one error named after the file (its tests are not known).
"""
import argparse
import collections
import concurrent.futures
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))
from process_tree import kill_tree  # noqa: E402

DEFAULT_TREE = ROOT.parent / "shared" / "third_party" / "torch-neuronx-tests"
WHERE_TO_GET_IT = (
    "TorchNeuron's tests are the tests/ folder (with the conftest.py beside it) of the public repository "
    "https://github.com/aws-neuron/torch-neuronx (the README of the shared third_party folder names the "
    "snapshot this project measures). Put a copy at {default} or pass its root with --tree PATH.")
MODES = {"async": "0", "blocking": "1"}  # the value of NEURON_LAUNCH_BLOCKING each mode runs with
OUTCOMES = ("passed", "failed", "error", "skipped")
# A pytest report larger than this is not a report of a few hundred tests: it is refused unparsed.
MAX_REPORT_BYTES = 64 << 20
MESSAGE_CHARS = 160


class SuiteError(Exception):
    """A problem with the tree or the options, said in one message (no traceback)."""


@dataclass
class TestOutcome:
    test: str  # the report's module and class (dotted), then :: and the test's name
    directory: str  # the folder under tests/
    outcome: str  # one of OUTCOMES
    message: str  # the first line of the failure, error or skip reason ("" when it passed)


def suite_files(tree: Path, only: list[str], files: list[str]) -> list[Path]:
    """The test files under tree/tests, relative to the tree, restricted to the directories in `only` and to the
    files in `files` (paths relative to the tree, as tests/python_ops/test_linear.py)."""
    tests = tree / "tests"
    if not (tests.is_dir() and (tree / "conftest.py").is_file()):
        raise SuiteError(f"{tree} is not TorchNeuron's test tree (it needs conftest.py and tests/). "
                         + WHERE_TO_GET_IT.format(default=DEFAULT_TREE))
    directories = sorted(p.name for p in tests.iterdir() if p.is_dir() and any(p.rglob("test_*.py")))
    unknown = sorted(set(only) - set(directories))
    if unknown:
        raise SuiteError(f"no test directory {', '.join(unknown)} under {tests}; it has {', '.join(directories)}")
    chosen = only or ([] if files else directories)
    found = {path.relative_to(tree) for name in chosen for path in (tests / name).rglob("test_*.py")}
    named = {Path(file) for file in files}
    missing = sorted(str(file) for file in named if not (tree / file).is_file())
    if missing:
        raise SuiteError(f"no test file {', '.join(missing)} under {tree} (give paths relative to it, "
                         "as tests/python_ops/test_linear.py)")
    return sorted(found | named)


def directory_of(file: Path) -> str:
    return file.parts[1]  # tests/<directory>/...


def first_line(text: str | None) -> str:
    line = next((line.strip() for line in (text or "").splitlines() if line.strip()), "")
    return line[:MESSAGE_CHARS]


def cause(element) -> str:
    """What went wrong, in one line: the report's message, except that pytest's message for a file that failed
    to import is only "collection failure", so the last line of its traceback ("E   ImportError: ...") says more."""
    message = element.get("message")
    if message == "collection failure":
        raised = [line[1:].strip() for line in (element.text or "").splitlines() if line.startswith("E ")]
        message = raised[-1] if raised else message
    return first_line(message or element.text)


def file_error(file: Path, message: str) -> list[TestOutcome]:
    return [TestOutcome(file.as_posix(), directory_of(file), "error", message)]


def last_line(log: Path) -> str:
    lines = [line.strip() for line in log.read_text(errors="replace").splitlines() if line.strip()]
    return lines[-1][:MESSAGE_CHARS] if lines else "(nothing)"


def read_report(report: Path, file: Path, log: Path) -> list[TestOutcome]:
    """The outcomes in one pytest --junitxml report, or one error for the file when the report is missing
    (with the last line pytest printed), oversized or not the XML pytest writes."""
    try:
        if report.stat().st_size > MAX_REPORT_BYTES:
            return file_error(file, f"its report is larger than {MAX_REPORT_BYTES} bytes")
        root = ElementTree.parse(report).getroot()
    except FileNotFoundError:
        return file_error(file, f"pytest left no report; its output ended: {last_line(log)}")
    except (OSError, ElementTree.ParseError) as problem:
        return file_error(file, f"its report is unreadable: {problem}")
    outcomes = []
    for case in root.iter("testcase"):
        module_and_class = case.get("classname")  # dotted: tests.views.test_x.TestClass
        test = f"{module_and_class}::{case.get('name', '?')}" if module_and_class else case.get("name", "?")
        outcome, message = "passed", ""
        for tag, name in (("failure", "failed"), ("error", "error"), ("skipped", "skipped")):
            element = case.find(tag)
            if element is not None:
                outcome, message = name, cause(element)
                break
        outcomes.append(TestOutcome(test, directory_of(file), outcome, message))
    return outcomes or file_error(file, "its report holds no test")


def run_file(copy: Path, file: Path, mode: str, timeout: float, scratch: Path) -> list[TestOutcome]:
    """One pytest process for one file of the copied tree, in the given mode; its outcomes."""
    stem = f"{mode}-{file.as_posix().replace('/', '-')}"
    report, log = scratch / f"{stem}.xml", scratch / f"{stem}.log"
    environment = dict(os.environ, NEURON_LAUNCH_BLOCKING=MODES[mode], PYTHONDONTWRITEBYTECODE="1",
                       # the checkout this script belongs to is the one measured, whatever is installed
                       PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))
    command = [sys.executable, "-m", "pytest", str(file), "-q", "-p", "no:cacheprovider", "--rootdir", str(copy),
               f"--junitxml={report}"]
    with open(log, "wb") as output:
        process = subprocess.Popen(command, cwd=copy, env=environment, stdin=subprocess.DEVNULL, stdout=output,
                                   stderr=subprocess.STDOUT)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_tree(process.pid)
            process.wait()
            return file_error(file, f"timed out after {timeout:g} s (killed with its processes)")
    if process.returncode < 0:
        return file_error(file, f"pytest died of signal {-process.returncode}")
    return read_report(report, file, log)


def run_mode(copy: Path, files: list[Path], mode: str, timeout: float, jobs: int, scratch: Path) -> list[TestOutcome]:
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        runs = [pool.submit(run_file, copy, file, mode, timeout, scratch) for file in files]
        outcomes = []
        for done, run in enumerate(runs, 1):
            outcomes.extend(run.result())
            print(f"\r[{mode}] {done}/{len(files)} files", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return outcomes


def pass_rate(counts: collections.Counter) -> str:
    total = sum(counts.values())
    return f"{100 * counts['passed'] / total:.1f}%" if total else "-"


def table(mode: str, outcomes: list[TestOutcome]) -> str:
    by_directory = collections.defaultdict(collections.Counter)
    for outcome in outcomes:
        by_directory[outcome.directory][outcome.outcome] += 1
    total = sum(by_directory.values(), collections.Counter())
    rows = [f"## mode: {mode} (NEURON_LAUNCH_BLOCKING={MODES[mode]})", "",
            "| directory | " + " | ".join(OUTCOMES) + " | total | pass rate |",
            "|---|" + "---:|" * (len(OUTCOMES) + 2)]  # the pass rate is passed over total
    for name, counts in [*sorted(by_directory.items()), ("**total**", total)]:
        rows.append(f"| {name} | " + " | ".join(str(counts[o]) for o in OUTCOMES)
                    + f" | {sum(counts.values())} | {pass_rate(counts)} |")
    return "\n".join(rows)


def commonest_causes(outcomes: list[TestOutcome], how_many: int) -> str:
    causes = collections.Counter(o.message or "(no message)" for o in outcomes if o.outcome in ("failed", "error"))
    return "\n".join(f"{count:5d}  {message}" for message, count in causes.most_common(how_many))


def project_commit() -> str:
    result = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tree", type=Path, default=DEFAULT_TREE,
                        help="the root of TorchNeuron's tests (holding conftest.py and tests/); default %(default)s")
    parser.add_argument("--mode", choices=(*MODES, "both"), default="both")
    parser.add_argument("--only", action="append", default=[], metavar="DIR",
                        help="run only this directory of tests/ (repeatable)")
    parser.add_argument("--files", action="append", default=[], metavar="FILE",
                        help="run this test file, relative to the tree (repeatable; adds to --only)")
    parser.add_argument("--jobs", type=int, default=1, help="test files run in parallel (default 1)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds one file may take (default 600)")
    parser.add_argument("--causes", type=int, default=10, help="how many of the commonest failure messages to print")
    parser.add_argument("--out", type=Path, help="write every test's outcome here, as JSON")
    options = parser.parse_args()
    if options.jobs < 1 or options.timeout <= 0:
        parser.error("--jobs must be at least 1 and --timeout positive")
    modes = list(MODES) if options.mode == "both" else [options.mode]
    try:
        if not options.tree.is_dir():
            raise SuiteError(f"TorchNeuron's test tree is not at {options.tree}. "
                             + WHERE_TO_GET_IT.format(default=DEFAULT_TREE))
        files = suite_files(options.tree, options.only, options.files)
        with tempfile.TemporaryDirectory(prefix="torchneuron-suite-") as temporary:
            copy, scratch = Path(temporary) / "tree", Path(temporary) / "reports"
            shutil.copytree(options.tree, copy, symlinks=True,
                            ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc"))
            scratch.mkdir()
            results = {mode: run_mode(copy, files, mode, options.timeout, options.jobs, scratch) for mode in modes}
    except (SuiteError, OSError, shutil.Error) as problem:
        print(f"torchneuron_suite: {problem}", file=sys.stderr)
        return 2
    for mode, outcomes in results.items():
        print(table(mode, outcomes) + "\n")
        print(f"commonest failure and error messages ({mode}):")
        print(commonest_causes(outcomes, options.causes) + "\n")
    if options.out:
        record = {"date": datetime.date.today().isoformat(), "commit": project_commit(),
                  "tree": str(options.tree.resolve()), "directories": sorted({directory_of(f) for f in files}),
                  "files": len(files), "timeout_seconds": options.timeout,
                  "modes": {mode: [asdict(o) for o in outcomes] for mode, outcomes in results.items()}}
        try:
            options.out.write_text(json.dumps(record, indent=1) + "\n")
        except OSError as problem:
            print(f"torchneuron_suite: cannot write {options.out}: {problem}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
