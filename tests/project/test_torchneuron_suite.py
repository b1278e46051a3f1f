"""TorchNeuron's own test suite against its strict table of expected status
(tests/support/expected/torchneuron_suite_status.py, checked by benchmarks/torchneuron_suite.py --expected): the
comparison itself (an unexpected failure and an unexpected pass both fail, regeneration keeps the reasons written,
hostile tables and saved runs are refused with a message), and a slice of the suite run through the runner in each
mode, which must match the table. The whole suite is the runner's to run (docs/conformance.md gives the figures).
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
import torchneuron_suite as suite  # noqa: E402

# The CI slice, per mode: files that cover the public contract (devices, events, views, memory statistics, an eager op
# and one of TorchNeuron's Python-registered ops) in the asynchronous mode, and the synchronisation points again in
# the blocking one, at about a minute of CPU on a 2-core machine (each file costs a fresh interpreter that imports
# torch: measured in docs/conformance.md).
SLICE = {
    "async": ("tests/device/test_device.py", "tests/streams/test_event_synchronization.py",
              "tests/views/test_reshape_ops.py", "tests/memory/test_memory_stats.py", "tests/operations/test_clone.py",
              "tests/python_ops/test_index_add.py"),
    "blocking": ("tests/streams/test_event_synchronization.py", "tests/streams/test_stream_synchronization.py"),
}

FILE = "tests/views/test_x.py"
FAILING, PASSING = "tests.views.test_x.TestX::test_fails", "tests.views.test_x.TestX::test_passes"


def outcome(test: str, result: str, file: str = FILE, message: str = "") -> suite.TestOutcome:
    return suite.TestOutcome(test, file, file.split("/")[1], result, message)


def entry(result="failed", category="internal-api", reason="calls torch_neuronx._C"):
    return {"outcome": result, "category": category, "reason": reason}


def run(*outcomes, modes=("async",)) -> dict:
    return {mode: list(outcomes) for mode in modes}


def test_a_listed_failure_that_still_fails_and_an_unlisted_pass_match():
    results = run(outcome(FAILING, "failed", message="AttributeError"), outcome(PASSING, "passed"))
    assert suite.mismatches({FAILING: entry()}, results, [FILE]) == []


def test_an_unexpected_failure_is_a_mismatch():
    [problem] = suite.mismatches({}, run(outcome(FAILING, "failed", message="AssertionError: 1 != 2")), [FILE])
    assert FAILING in problem and "unexpected failed: AssertionError: 1 != 2" in problem


def test_an_unexpected_pass_is_a_mismatch_that_asks_for_the_entry_to_go():
    [problem] = suite.mismatches({PASSING: entry()}, run(outcome(PASSING, "passed")), [FILE])
    assert PASSING in problem and "remove its entry" in problem


def test_another_failure_than_the_listed_one_and_a_vanished_test_are_mismatches():
    table = {FAILING: entry("error"), "tests.views.test_x.TestX::test_renamed": entry()}
    problems = suite.mismatches(table, run(outcome(FAILING, "failed")), [FILE])
    assert len(problems) == 2 and "expects error" in problems[0] and "did not report it" in problems[1]


def test_the_suites_own_skips_are_not_listed_and_a_mode_not_named_passes():
    table = {FAILING: entry({"blocking": "failed"})}
    results = {"async": [outcome(FAILING, "passed"), outcome(PASSING, "skipped", message="needs hardware")],
               "blocking": [outcome(FAILING, "failed"), outcome(PASSING, "skipped")]}
    assert suite.mismatches(table, results, [FILE]) == []


def test_a_file_that_failed_as_a_whole_is_one_mismatch_and_keeps_its_entries():
    table = {FAILING: entry()}
    results = run(outcome(FILE, "error", message="timed out after 600 s"))
    [problem] = suite.mismatches(table, results, [FILE])
    assert "timed out" in problem
    assert suite.regenerated(table, results, [FILE]) == {**table, FILE: entry(
        "error", "open", suite.PLACEHOLDER + "timed out after 600 s")}


def test_regeneration_keeps_reasons_drops_passes_and_marks_new_failures_for_a_human():
    kept_elsewhere = "tests.device.test_y::test_not_run"
    table = {FAILING: entry(reason="hand-written"), PASSING: entry(), kept_elsewhere: entry(reason="not run")}
    new_failure = "tests.views.test_x::test_new"
    results = run(outcome(FAILING, "error", message="now an error"), outcome(PASSING, "passed"),
                  outcome(new_failure, "failed", message="RuntimeError: boom"), modes=tuple(suite.MODES))
    assert suite.regenerated(table, results, [FILE]) == {
        FAILING: {"outcome": "error", "category": "internal-api", "reason": "hand-written"},
        kept_elsewhere: table[kept_elsewhere],  # its file was not run: untouched
        new_failure: entry("failed", "open", suite.PLACEHOLDER + "RuntimeError: boom"),
    }


def test_regeneration_keeps_the_expectation_of_a_mode_not_run():
    table = {FAILING: entry({"blocking": "failed"}, reason="blocking only"), PASSING: entry(reason="both")}
    results = run(outcome(FAILING, "passed"), outcome(PASSING, "passed"))
    assert suite.regenerated(table, results, [FILE]) == {
        FAILING: entry({"blocking": "failed"}, reason="blocking only"),
        PASSING: entry({"blocking": "failed"}, reason="both")}


def test_the_table_round_trips_through_its_file(tmp_path):
    table = {FAILING: entry(reason="quotes 'it' and \"that\""), PASSING: entry({"async": "skipped"}, "open", "x")}
    path = tmp_path / "table.py"
    suite.write_table(path, table)
    assert suite.load_table(path) == table


@pytest.mark.parametrize("text, complaint", [
    ("EXPECTED = __import__('os').getcwd()", "no literal EXPECTED"),
    ("EXPECTED = {", "no literal EXPECTED"),
    ("TABLE = {}", "no literal EXPECTED"),
    ("EXPECTED = []", "must be a dict"),
    ("EXPECTED = {'t::x': {'outcome': 'failed', 'category': 'flaky', 'reason': 'r'}}", "category 'flaky'"),
    ("EXPECTED = {'t::x': {'outcome': 'passed', 'category': 'open', 'reason': 'r'}}", "outcome must be"),
    ("EXPECTED = {'t::x': {'outcome': {'eager': 'failed'}, 'category': 'open', 'reason': 'r'}}", "outcome must be"),
    ("EXPECTED = {'t::x': {'outcome': 'failed', 'category': 'open', 'reason': ' '}}", "reason must say"),
    ("EXPECTED = {'t::x': {'outcome': 'failed', 'category': 'open'}}", "exactly outcome, category and reason"),
    ("EXPECTED = {'t\\n::x': {'outcome': 'failed', 'category': 'open', 'reason': 'r'}}", "is not a test id"),
    ("EXPECTED = " + "[" * 100000 + "]" * 100000, "no literal EXPECTED"),
])
def test_a_malformed_table_is_refused_with_what_is_wrong(tmp_path, text, complaint):
    path = tmp_path / "table.py"
    path.write_text(text)
    with pytest.raises(suite.SuiteError, match=complaint):
        suite.load_table(path)


def saved_run(modes) -> dict:
    return {"files": [FILE], "modes": modes}


@pytest.mark.parametrize("content, complaint", [
    ("{not json", "not JSON"),
    (json.dumps([1, 2]), "not a run saved with --out"),
    (json.dumps(saved_run({"eager": []})), "unknown mode eager"),
    (json.dumps(saved_run({"async": {}})), "must be a list"),
    (json.dumps(saved_run({"async": [{"test": "t", "outcome": "passed"}]})), "is not an outcome"),
    (json.dumps(saved_run({"async": [{**suite.asdict(outcome(PASSING, "passed")), "outcome": "rm -rf"}]})),
     "is not an outcome"),
    (json.dumps(saved_run({"async": [suite.asdict(outcome(PASSING, "passed", file="tests/other.py"))]})),
     "is not an outcome of one of the run's files"),
    (json.dumps(saved_run({"async": [suite.asdict(outcome("x" * 5000, "passed"))]})), "is not a test id"),
    ("[" * 100000 + "]" * 100000, "not JSON"),
])
def test_a_malformed_saved_run_is_refused_with_what_is_wrong(tmp_path, content, complaint):
    path = tmp_path / "run.json"
    path.write_text(content)
    with pytest.raises(suite.SuiteError, match=complaint):
        suite.load_run(path)


def test_a_huge_saved_run_is_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setattr(suite, "MAX_INPUT_BYTES", 100)
    path = tmp_path / "run.json"
    path.write_text(json.dumps(saved_run({"async": [suite.asdict(outcome(PASSING, "passed"))] * 10})))
    with pytest.raises(suite.SuiteError, match="larger than 100 bytes"):
        suite.load_run(path)


PROBE = "LOCALNEURON_SUITE_PROBE"


def test_a_files_own_environment_reaches_its_process_and_no_other(tmp_path, monkeypatch):
    """A file of FILE_ENVIRONMENTS runs with its variables; the file beside it, in the same run, without them."""
    tree = tmp_path / "tree"
    (tree / "tests" / "views").mkdir(parents=True)
    (tree / "conftest.py").write_text("")
    (tree / "tests" / "views" / "test_given.py").write_text(
        f"import os\ndef test_it():\n    assert os.environ.get({PROBE!r}) == 'given'\n")
    (tree / "tests" / "views" / "test_plain.py").write_text(
        f"import os\ndef test_it():\n    assert {PROBE!r} not in os.environ\n")
    given = "tests/views/test_given.py"
    monkeypatch.delenv(PROBE, raising=False)
    monkeypatch.setattr(suite, "FILE_ENVIRONMENTS", {given: suite.FileEnvironment({PROBE: "given"}, "the test says")})
    scratch = tmp_path / "reports"
    scratch.mkdir()
    files = suite.suite_files(tree, [], [])
    outcomes = [o for file in files for o in suite.run_file(tree, file, "async", 120, scratch)]
    assert [(o.file, o.outcome) for o in outcomes] == [(given, "passed"), ("tests/views/test_plain.py", "passed")], \
        outcomes
    assert PROBE not in suite.os.environ  # the runner's own environment is untouched
    recorded = suite.environments_given([file.as_posix() for file in files])
    assert recorded == {given: {"variables": {PROBE: "given"}, "reason": "the test says"}}
    assert f"| {given} | {PROBE}=given | the test says |" in suite.environments_section(recorded)


def test_the_listed_environments_are_the_suites_own_requests():
    """Each entry names a file of the suite and quotes the skip that asks for its variables; a run without those
    files records none, and the report then says nothing of them."""
    assert suite.environments_given(["tests/views/test_x.py"]) == {} and suite.environments_section({}) == ""
    for file, listed in suite.FILE_ENVIRONMENTS.items():
        assert listed.variables and listed.reason.startswith("its skip: ")
        assert all(f"{name}={value}" in listed.reason for name, value in listed.variables.items())
        if (suite.DEFAULT_TREE / "conftest.py").is_file():
            assert (suite.DEFAULT_TREE / file).is_file(), file


def runner(*arguments, timeout=60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "torchneuron_suite.py"), *map(str, arguments)],
                          capture_output=True, text=True, timeout=timeout)


def test_the_command_checks_a_saved_run_and_refuses_a_hostile_one(tmp_path):
    table, saved = tmp_path / "table.py", tmp_path / "run.json"
    suite.write_table(table, {FAILING: entry()})
    saved.write_text(json.dumps(saved_run({mode: [suite.asdict(outcome(FAILING, "passed"))] for mode in suite.MODES})))
    checked = runner("--from", saved, "--expected", "--table", table)
    assert checked.returncode == 1 and "remove its entry" in checked.stdout
    assert runner("--from", saved, "--write-expected", "--table", table).returncode == 0
    assert suite.load_table(table) == {}
    assert runner("--from", saved, "--expected", "--table", table).returncode == 0
    missing = runner("--from", saved, "--expected", "--table", tmp_path / "absent.py")
    assert missing.returncode == 2 and "write one with --write-expected" in missing.stderr
    saved.write_text("\x00" * 64)
    refused = runner("--from", saved, "--expected", "--table", table)
    assert refused.returncode == 2 and "not JSON" in refused.stderr and "Traceback" not in refused.stderr


def test_an_asynchronous_only_entry_must_pass_in_the_asynchronous_mode(tmp_path):
    table = tmp_path / "table.py"
    for outcome_of, accepted in (({"blocking": "failed"}, True), ("failed", False), ({"async": "failed"}, False),
                                 ({"async": "failed", "blocking": "failed"}, False)):
        suite.write_table(table, {FAILING: entry(outcome_of, "asynchronous-only", "fuses only queued ops")})
        if accepted:
            assert suite.load_table(table)[FAILING]["category"] == "asynchronous-only"
        else:
            with pytest.raises(suite.SuiteError, match="must pass in the asynchronous mode"):
                suite.load_table(table)


def test_the_committed_table_is_well_formed_and_every_reason_is_written():
    table = suite.load_table(suite.EXPECTED_TABLE)
    assert table, f"{suite.EXPECTED_TABLE} is empty or missing"
    placeholders = sorted(test for test, listed in table.items() if listed["reason"].startswith(suite.PLACEHOLDER))
    assert not placeholders, f"entries whose reason is still the placeholder: {placeholders[:5]}"
    unquoted = sorted(test for test, listed in table.items()
                      if listed["category"] == "superseded" and "2.34" not in listed["reason"])
    assert not unquoted, f"superseded entries must quote the 2.34 documentation: {unquoted[:5]}"


@pytest.mark.parametrize("mode", sorted(SLICE))
def test_a_slice_of_the_suite_matches_the_table(mode):
    if not (suite.DEFAULT_TREE / "conftest.py").is_file():
        pytest.skip(suite.WHERE_TO_GET_IT.format(default=suite.DEFAULT_TREE))
    files = [argument for file in SLICE[mode] for argument in ("--files", file)]
    checked = runner(*files, "--mode", mode, "--timeout", "300", "--expected", timeout=900)
    assert checked.returncode == 0, checked.stdout[-4000:] + checked.stderr[-2000:]
