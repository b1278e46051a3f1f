"""Runs TorchNeuron's own test suite, unchanged, against this checkout of localneuron and counts what passes.

The suite is third-party test data (Apache-2.0), from the public repository github.com/aws-neuron/torch-neuronx;
the project expects it in third_party/torch-neuronx-tests of the shared folder beside the checkout (--tree says
otherwise). It is copied to a temporary folder first, so the run writes nothing into it (no caches, no bytecode,
no reports). Each test file runs in a pytest process of its own, with a time limit: one file that hangs or crashes the
interpreter costs only its own tests, and a hung file is killed with every process it started. Each mode runs the
whole selection: asynchronous (TorchNeuron's default, NEURON_LAUNCH_BLOCKING=0) and blocking (=1).

A few files of the suite skip themselves unless the environment holds what their skip message names (the suite's
own set-up does not give it, and it asks for the file to be run so). FILE_ENVIRONMENTS lists them, each with the
suite's words as its reason: such a file, and no other, runs with those variables set on top of the caller's. The run
says so, in the printed report and in the JSON ("file_environments"), so that it is not taken for the plain run.

    python3 benchmarks/torchneuron_suite.py [--tree PATH] [--mode async|blocking|both] [--only DIR ...]
                                            [--files FILE ...] [--jobs N] [--timeout SECONDS] [--out outcomes.json]
                                            [--from outcomes.json] [--expected | --write-expected] [--table PATH]

Prints, per mode, a table per directory of tests/ (passed / failed / error / skipped / total, pass rate) and the
commonest failure messages; --out writes every test's outcome as JSON, and --from reads such a file instead of
running the suite. A file that hangs, crashes or leaves no readable report counts as one error named after the file
(its tests are not known).

The strict table of expected status (tests/support/expected/torchneuron_suite_status.py) lists every test that is
expected not to pass, with its category (CATEGORIES) and a reason; every other test must pass, or be skipped by the
suite itself (its own skip and xfail markers). --expected compares the run with it and exits 1 listing each
mismatch: a test that fails unlisted, a listed test that passes (its entry must go) or ends otherwise than listed.
--write-expected rewrites the table from the run: entries of tests that still do not pass keep their category and
reason, entries of tests that now pass go, and new failures come in as "open" with a reason starting PLACEHOLDER,
for a human to replace. Tests of files the run did not measure (not selected, or failed as a whole) keep their
entries either way.
"""
import argparse
import ast
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

EXPECTED_TABLE = ROOT / "tests" / "support" / "expected" / "torchneuron_suite_status.py"
# Why a test of the suite is expected not to pass here: every entry of the table names one of these.
CATEGORIES = {
    "internal-api": "the test imports or calls a module outside TorchNeuron's public contract (torch_neuronx._C, "
                    "torch_neuronx.python_ops, ...), which localneuron does not mimic",
    "hardware-only": "the test needs Trainium itself: /dev/neuron, the real Neuron runtime, NEFF files",
    "superseded": "TorchNeuron's 2.34 documentation states other behaviour than the test (the reason quotes the page)",
    "environment": "the suite's own set-up behaves otherwise off Trainium (the reason says where)",
    "asynchronous-only": "the test checks what TorchNeuron does only with ops queued, so under NEURON_LAUNCH_BLOCKING=1 "
                         "it fails on TorchNeuron too (the reason cites its source); expected to fail in the blocking "
                         "mode alone",
    "open": "a difference not settled yet: a localneuron defect, or a choice of localneuron's no public page decides "
            "(the reason names the cause)",
}
EXPECTED_OUTCOMES = ("failed", "error", "skipped")  # a listed test ends so; "skipped" only when the skip is ours
PLACEHOLDER = "TO CLASSIFY (written by --write-expected; replace with the cause): "
TABLE_HEADER = '''"""Expected status of TorchNeuron's own tests run here, keyed by the test id the runner reports
(benchmarks/torchneuron_suite.py --expected checks a run against it).

Only tests expected not to pass are listed; every other test must pass, or be skipped by the suite itself. An entry's
outcome is failed, error or skipped (a skip that is ours), or a dict from mode to outcome when the modes differ (a mode
not named passes). Its category is one of:
{categories}

Regenerate after a change: python3 benchmarks/torchneuron_suite.py --write-expected [--mode async] [--from RUN.json].
A reason is kept while its test still does not pass; a new failure comes in as open, with a reason starting
"{placeholder}" for a human to replace.
"""
# flake8: noqa: E501
'''


@dataclass(frozen=True)
class FileEnvironment:
    variables: dict  # set for this file's process only, on top of the caller's environment
    reason: str  # the suite's own words (its skip message) asking for them


# The files the suite asks to run in an environment of their own, by their skip message; nothing else gets one.
FILE_ENVIRONMENTS = {
    "tests/python_ops/test_concatenation_ops.py": FileEnvironment(
        {"TORCH_NEURONX_ENABLE_CONCATENATION": "1", "TORCH_NEURONX_ENABLE_STABLEHLO": "1"},
        'its skip: "Concatenation tests require TORCH_NEURONX_ENABLE_CONCATENATION=1 and '
        'TORCH_NEURONX_ENABLE_STABLEHLO=1"'),
    "tests/device/test_device_lnc1_all_cores.py": FileEnvironment(
        {"NEURON_LOGICAL_NC_CONFIG": "1", "LOCALNEURON_CHIPS": "16"},
        'its skip: "Test requires NEURON_LOGICAL_NC_CONFIG=1 ... Run this test file in isolation" (its '
        "conftest sets it only on Trainium, where /dev/neuron0 exists), on the instance its docstring names, "
        '"Hardware must support 128 devices (e.g., Trn2.48xlarge with LNC=1)": 16 chips, LOCALNEURON_CHIPS=16'),
}


def file_environment(file: Path | str) -> dict:
    """The variables the runner sets for this file's process alone (FILE_ENVIRONMENTS); {} for every other file."""
    listed = FILE_ENVIRONMENTS.get(Path(file).as_posix())
    return dict(listed.variables) if listed else {}


def environments_given(files: list[str]) -> dict[str, dict]:
    """For a run's files, the environments of their own it gave them: file -> {"variables", "reason"}."""
    return {file: {"variables": dict(FILE_ENVIRONMENTS[file].variables), "reason": FILE_ENVIRONMENTS[file].reason}
            for file in files if file in FILE_ENVIRONMENTS}


def environments_section(given: dict[str, dict]) -> str:
    """The report's note of the files that ran in an environment of their own ("" when none did)."""
    if not given:
        return ""
    rows = ["## files run in an environment of their own (not the plain run: FILE_ENVIRONMENTS)", "",
            "| file | variables | why |", "|---|---|---|"]
    for file, listed in sorted(given.items()):
        variables = " ".join(f"{name}={value}" for name, value in sorted(listed["variables"].items()))
        rows.append(f"| {file} | {variables} | {listed['reason']} |")
    return "\n".join(rows)


# A table or a saved run larger than this is not one of this suite's few thousand tests: it is refused unread.
MAX_INPUT_BYTES = 64 << 20
MAX_TEST_ID_CHARS = 1000


class SuiteError(Exception):
    """A problem with the tree or the options, said in one message (no traceback)."""


@dataclass
class TestOutcome:
    test: str  # the report's module and class (dotted), then :: and the test's name
    file: str  # the test file, relative to the tree (tests/<directory>/...)
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
    return [TestOutcome(file.as_posix(), file.as_posix(), directory_of(file), "error", message)]


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
        outcomes.append(TestOutcome(test, file.as_posix(), directory_of(file), outcome, message))
    return outcomes or file_error(file, "its report holds no test")


def run_file(copy: Path, file: Path, mode: str, timeout: float, scratch: Path) -> list[TestOutcome]:
    """One pytest process for one file of the copied tree, in the given mode; its outcomes."""
    stem = f"{mode}-{file.as_posix().replace('/', '-')}"
    report, log = scratch / f"{stem}.xml", scratch / f"{stem}.log"
    environment = dict(os.environ, **file_environment(file), NEURON_LAUNCH_BLOCKING=MODES[mode],
                       PYTHONDONTWRITEBYTECODE="1",
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


def module_of(file: str) -> str:
    """The dotted module pytest's report names a file's tests by: tests/views/test_x.py -> tests.views.test_x."""
    return file.removesuffix(".py").replace("/", ".")


def file_of(test: str, modules: dict[str, str]) -> str | None:
    """The file (among `modules`, dotted module -> file) a test id belongs to: its id names the dotted module, maybe
    a class after it, then ::name; a file that failed as a whole is its own id."""
    if test in modules.values():
        return test
    dotted = test.split("::")[0]
    while dotted:
        if dotted in modules:
            return modules[dotted]
        dotted = dotted.rpartition(".")[0]
    return None


def measured_files(results: dict[str, list[TestOutcome]], files: list[str]) -> dict[str, str]:
    """Dotted module -> file, for the run's files that reported their tests in every mode run (a file that failed as
    a whole says nothing of the tests it holds)."""
    whole_file_errors = {o.test for outcomes in results.values() for o in outcomes if o.test == o.file}
    return {module_of(file): file for file in files if file not in whole_file_errors}


def expected_outcome(entry: dict | None, mode: str) -> str | None:
    """The outcome an entry expects in a mode; None when the test is expected to pass there."""
    if entry is None:
        return None
    outcome = entry["outcome"]
    return outcome.get(mode) if isinstance(outcome, dict) else outcome


def mismatches(table: dict[str, dict], results: dict[str, list[TestOutcome]], files: list[str]) -> list[str]:
    """Every way the run differs from the table, one line each, saying what to do."""
    modules = measured_files(results, files)
    problems = []
    for mode, outcomes in results.items():
        reported = set()
        for outcome in outcomes:
            reported.add(outcome.test)
            entry = table.get(outcome.test)
            expected = expected_outcome(entry, mode)
            if expected is None:
                if outcome.outcome in ("failed", "error"):
                    problems.append(f"[{mode}] {outcome.test}: unexpected {outcome.outcome}: {outcome.message} "
                                    "(fix it, or list it in the table with its category and reason)")
            elif outcome.outcome == "passed":
                problems.append(f"[{mode}] {outcome.test}: passes, but the table expects {expected} "
                                f"({entry['category']}: {entry['reason']}); remove its entry")
            elif outcome.outcome != expected:
                problems.append(f"[{mode}] {outcome.test}: {outcome.outcome} ({outcome.message}), but the table "
                                f"expects {expected} ({entry['category']}: {entry['reason']})")
        for test, entry in sorted(table.items()):
            if test not in reported and expected_outcome(entry, mode) and file_of(test, modules):
                problems.append(f"[{mode}] {test}: listed in the table, but the run did not report it (its file "
                                "now reports its tests, or it was renamed or removed upstream); remove or rename "
                                "its entry")
    return problems


def regenerated(table: dict[str, dict], results: dict[str, list[TestOutcome]], files: list[str]) -> dict[str, dict]:
    """The table rewritten from a run (see the module's docstring): reasons kept, passes dropped, new failures open."""
    modules = measured_files(results, files)
    measured = collections.defaultdict(dict)  # test -> mode -> its outcome
    for mode, outcomes in results.items():
        for outcome in outcomes:
            if outcome.test == outcome.file or outcome.file in modules.values():
                measured[outcome.test][mode] = outcome
    new = {test: entry for test, entry in table.items() if test not in measured and not file_of(test, modules)}
    for test, by_mode in measured.items():
        old = table.get(test)
        # a skip is the suite's own decision unless the table already says it is ours
        per_mode = {mode: outcome.outcome for mode, outcome in by_mode.items()
                    if outcome.outcome in ("failed", "error")
                    or outcome.outcome == "skipped" == expected_outcome(old, mode)}
        for mode in MODES:
            # a mode not run keeps what the table said; a new failure is presumed in it too until it is run
            presumed = expected_outcome(old, mode) if old else next(iter(per_mode.values()), None)
            if mode not in by_mode and presumed:
                per_mode[mode] = presumed
        if not per_mode:
            continue
        keeps_reason = old is not None and not old["reason"].startswith(PLACEHOLDER)
        first_failure = next((o.message for o in by_mode.values() if o.outcome != "passed"), "")
        category, reason = (old["category"], old["reason"]) if keeps_reason else (
            "open", PLACEHOLDER + (first_failure or "(no message)"))
        same_everywhere = len(per_mode) == len(MODES) and len(set(per_mode.values())) == 1
        outcome = next(iter(per_mode.values())) if same_everywhere else dict(sorted(per_mode.items()))
        new[test] = {"outcome": outcome, "category": category, "reason": reason}
    return dict(sorted(new.items()))


def refuse(where: str, problem: str) -> SuiteError:
    return SuiteError(f"{where}: {problem}")


def read_bounded(path: Path, what: str) -> str:
    try:
        if path.stat().st_size > MAX_INPUT_BYTES:
            raise refuse(path, f"larger than {MAX_INPUT_BYTES} bytes: not {what}")
        return path.read_text()
    except (OSError, UnicodeDecodeError) as problem:
        raise refuse(path, f"cannot read {what}: {problem}") from None


def checked_test_id(test, where: str) -> str:
    if not (isinstance(test, str) and test and len(test) <= MAX_TEST_ID_CHARS and test.isprintable()):
        raise refuse(where, f"{str(test)[:80]!r} is not a test id (a line of at most {MAX_TEST_ID_CHARS} "
                            "printable characters)")
    return test


def checked_entry(test, entry, where: str) -> dict:
    """One entry of the table, refused with what is wrong when it is not one."""
    checked_test_id(test, where)
    what = f"entry {test!r}"
    if not isinstance(entry, dict) or set(entry) != {"outcome", "category", "reason"}:
        raise refuse(where, f"{what} must be a dict of exactly outcome, category and reason")
    outcome = entry["outcome"]
    per_mode = outcome if isinstance(outcome, dict) else {mode: outcome for mode in MODES}
    if not per_mode or not set(per_mode) <= set(MODES) or not all(o in EXPECTED_OUTCOMES for o in per_mode.values()):
        raise refuse(where, f"{what}: outcome must be one of {', '.join(EXPECTED_OUTCOMES)}, or a dict from modes "
                            f"({', '.join(MODES)}) to one of them (a mode not named passes)")
    if entry["category"] not in CATEGORIES:
        raise refuse(where, f"{what}: category {entry['category']!r} is none of {', '.join(CATEGORIES)}")
    if entry["category"] == "asynchronous-only" and per_mode.keys() != {"blocking"}:
        raise refuse(where, f"{what}: an asynchronous-only test must pass in the asynchronous mode: its outcome names "
                            "the blocking mode alone")
    if not isinstance(entry["reason"], str) or not entry["reason"].strip():
        raise refuse(where, f"{what}: its reason must say why the test does not pass")
    return entry


def load_table(path: Path) -> dict[str, dict]:
    """The table of expected status: the literal EXPECTED = {...} of a Python file, read without running it."""
    if not path.exists():
        return {}
    text = read_bounded(path, "a table of expected status")
    try:
        literal = next(node.value for node in ast.parse(text).body if isinstance(node, ast.Assign)
                       and [getattr(target, "id", None) for target in node.targets] == ["EXPECTED"])
        table = ast.literal_eval(literal)
    except (SyntaxError, ValueError, StopIteration, RecursionError, MemoryError) as problem:
        raise refuse(path, f"no literal EXPECTED = {{...}} ({problem or 'missing'}); fix it, or delete the file and "
                           "regenerate it with --write-expected") from None
    if not isinstance(table, dict):
        raise refuse(path, "EXPECTED must be a dict from test ids to entries")
    return {test: checked_entry(test, entry, str(path)) for test, entry in table.items()}


def write_table(path: Path, table: dict[str, dict]) -> None:
    lines = [f"    {test!r}: {{'outcome': {entry['outcome']!r}, 'category': {entry['category']!r}, "
             f"'reason': {entry['reason']!r}}}," for test, entry in sorted(table.items())]
    categories = "\n".join(f"  {name}: {meaning}" for name, meaning in CATEGORIES.items())
    path.write_text(TABLE_HEADER.format(categories=categories, placeholder=PLACEHOLDER.strip())
                    + "EXPECTED = {\n" + "".join(line + "\n" for line in lines) + "}\n")


def load_run(path: Path) -> tuple[dict[str, list[TestOutcome]], list[str]]:
    """The outcomes and files of a run saved with --out, refused with what is wrong when the file is not one.
    (saved_environments reads the environments of their own it gave.)"""
    try:
        record = json.loads(read_bounded(path, "a run saved with --out"))
    except (json.JSONDecodeError, RecursionError) as problem:
        raise refuse(path, f"not JSON ({problem}): give a file written by --out") from None
    if not (isinstance(record, dict) and isinstance(record.get("modes"), dict)
            and isinstance(record.get("files"), list)):
        raise refuse(path, "not a run saved with --out (it needs the keys modes and files)")
    unknown = sorted(set(record["modes"]) - set(MODES))
    if unknown:
        raise refuse(path, f"unknown mode {', '.join(map(str, unknown))}; modes are {', '.join(MODES)}")
    files = [checked_test_id(file, str(path)) for file in record["files"]]
    results = {}
    for mode, outcomes in record["modes"].items():
        if not isinstance(outcomes, list):
            raise refuse(path, f"the outcomes of mode {mode} must be a list")
        results[mode] = []
        for item in outcomes:
            fields = {name: item.get(name) for name in TestOutcome.__dataclass_fields__} if isinstance(
                item, dict) else {}
            if not (fields and all(isinstance(value, str) for value in fields.values())
                    and fields["outcome"] in OUTCOMES and fields["file"] in files):
                raise refuse(path, f"{str(item)[:120]} is not an outcome of one of the run's files (test, file, "
                                   f"directory, outcome among {', '.join(OUTCOMES)}, message)")
            checked_test_id(fields["test"], str(path))
            results[mode].append(TestOutcome(**{**fields, "message": first_line(fields["message"])}))
    return results, files


def saved_environments(path: Path) -> dict[str, dict]:
    """The environments of their own a run saved with --out gave its files (its "file_environments"; {} in a run saved
    before it recorded them), refused when it is not a dict of file -> {variables, reason}."""
    try:
        record = json.loads(read_bounded(path, "a run saved with --out"))
    except (json.JSONDecodeError, RecursionError) as problem:
        raise refuse(path, f"not JSON ({problem}): give a file written by --out") from None
    given = record.get("file_environments", {}) if isinstance(record, dict) else {}
    if not (isinstance(given, dict) and all(
            isinstance(listed, dict) and isinstance(listed.get("variables"), dict)
            and all(isinstance(name, str) and isinstance(value, str) for name, value in listed["variables"].items())
            and isinstance(listed.get("reason"), str) for listed in given.values())):
        raise refuse(path, "its file_environments must map files to {variables, reason}")
    return {checked_test_id(file, str(path)): listed for file, listed in given.items()}


def project_commit() -> str:
    result = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def run_suite(options) -> tuple[dict[str, list[TestOutcome]], list[str]]:
    """Every test's outcome per mode, and the files run (relative to the tree)."""
    if not options.tree.is_dir():
        raise SuiteError(f"TorchNeuron's test tree is not at {options.tree}. "
                         + WHERE_TO_GET_IT.format(default=DEFAULT_TREE))
    files = suite_files(options.tree, options.only, options.files)
    modes = list(MODES) if options.mode == "both" else [options.mode]
    with tempfile.TemporaryDirectory(prefix="torchneuron-suite-") as temporary:
        copy, scratch = Path(temporary) / "tree", Path(temporary) / "reports"
        shutil.copytree(options.tree, copy, symlinks=True,
                        ignore=shutil.ignore_patterns("__pycache__", ".pytest_cache", "*.pyc"))
        scratch.mkdir()
        results = {mode: run_mode(copy, files, mode, options.timeout, options.jobs, scratch) for mode in modes}
    return results, [file.as_posix() for file in files]


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
    parser.add_argument("--from", dest="saved", type=Path, metavar="OUTCOMES_JSON",
                        help="read the outcomes of a run saved with --out instead of running the suite")
    check = parser.add_mutually_exclusive_group()
    check.add_argument("--expected", action="store_true",
                       help="compare every outcome with the table of expected status; exit 1 on any mismatch")
    check.add_argument("--write-expected", action="store_true",
                       help="rewrite the table of expected status from this run, keeping the reasons written")
    parser.add_argument("--table", type=Path, default=EXPECTED_TABLE,
                        help="the table of expected status (default %(default)s)")
    options = parser.parse_args()
    if options.jobs < 1 or options.timeout <= 0:
        parser.error("--jobs must be at least 1 and --timeout positive")
    if options.saved and (options.only or options.files or options.out):
        parser.error("--from reads a saved run: its files and modes are the run's (drop --only, --files and --out)")
    if options.expected and not options.table.is_file():
        parser.error(f"no table of expected status at {options.table}: write one with --write-expected")
    try:
        expected = load_table(options.table) if options.expected or options.write_expected else {}
        results, files = load_run(options.saved) if options.saved else run_suite(options)
        given = saved_environments(options.saved) if options.saved else environments_given(files)
    except (SuiteError, OSError, shutil.Error) as problem:
        print(f"torchneuron_suite: {problem}", file=sys.stderr)
        return 2
    for mode, outcomes in results.items():
        print(table(mode, outcomes) + "\n")
        print(f"commonest failure and error messages ({mode}):")
        print(commonest_causes(outcomes, options.causes) + "\n")
    if given:
        print(environments_section(given) + "\n")
    try:
        if options.out:
            record = {"date": datetime.date.today().isoformat(), "commit": project_commit(),
                      "tree": str(options.tree.resolve()), "directories": sorted({f.split("/")[1] for f in files}),
                      "files": files, "timeout_seconds": options.timeout, "file_environments": given,
                      "modes": {mode: [asdict(o) for o in outcomes] for mode, outcomes in results.items()}}
            options.out.write_text(json.dumps(record, indent=1) + "\n")
        if options.write_expected:
            new = regenerated(expected, results, files)
            write_table(options.table, new)
            placeholders = sum(entry["reason"].startswith(PLACEHOLDER) for entry in new.values())
            print(f"wrote {len(new)} entries to {options.table} ({len(new) - len(expected):+d}); "
                  f"{placeholders} carry a placeholder reason to replace")
    except OSError as problem:
        print(f"torchneuron_suite: cannot write: {problem}", file=sys.stderr)
        return 2
    if options.expected:
        problems = mismatches(expected, results, files)
        for problem in problems:
            print(problem)
        print(f"{len(problems)} mismatches with {options.table}" if problems
              else f"every outcome is as {options.table} expects")
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
