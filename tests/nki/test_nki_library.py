"""Fast tier of AWS's NKI Library on localneuron: a representative subset of the library's own simulation-mode
tests, run unchanged through scripts/nki_library_tests.sh, each case held to the strict expected-status table
(tests/support/expected/nki_library_status.py: pass stays pass; an expected failure or skip that changes fails too).

The whole suite and the table: python scripts/nki_library_report.py (docs/nki-library.md lists every case).
Skips with the reason when the library tree or the framework's PyPI requirements are absent.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from localneuron.nki import library_tree

PROJECT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT / "scripts"))
sys.path.insert(0, str(PROJECT / "tests" / "support"))
sys.path.insert(0, str(PROJECT / "localneuron" / "nki" / "library_shim"))
import requirements_met  # noqa: E402

# test file -> -k expression: kernels of different families, each small at the library's fast shapes
FAST_TIER = {
    "test/integration/nkilib/core/cumsum/test_cumsum.py": "fast or (sweep and (1-256 or 1-512 or 1024-256))",
}
REQUIREMENTS = PROJECT / "localneuron" / "nki" / "library_shim" / "requirements.txt"


def _library():
    root = library_tree.find()
    if root is None:
        pytest.skip(f"AWS's NKI Library tree is absent; fetch it with: {library_tree.FETCH_COMMAND}")
    missing = requirements_met.missing(REQUIREMENTS.read_text().splitlines())
    if missing:
        pytest.skip(f"the NKI Library test framework needs {', '.join(missing)} from PyPI "
                    f"(pip install -r localneuron/nki/library_shim/requirements.txt)")
    return root


@pytest.mark.parametrize("test_file", sorted(FAST_TIER))
def test_fast_tier_cases_match_the_expected_status_table(test_file, tmp_path):
    import expected_status
    from nki_library_report import TABLE, read_junit, table_lines

    root = _library()
    junit = tmp_path / "junit.xml"
    selection = ["-k", FAST_TIER[test_file]] if FAST_TIER[test_file] else []
    env = dict(os.environ, NKI_LIBRARY_TESTS=test_file, NKI_LIBRARY_OUTPUT=str(tmp_path))
    run = subprocess.run(["bash", str(PROJECT / "scripts" / "nki_library_tests.sh"), str(root), "-q",
                          "-p", "no:randomly", f"--junitxml={junit}", *selection],
                         env=env, capture_output=True, text=True, timeout=1500)
    assert junit.exists(), f"the library's pytest did not run:\n{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
    statuses = table_lines(read_junit(junit))
    assert statuses, f"no case of {test_file} ran:\n{run.stdout[-2000:]}"
    expected = expected_status.load(str(TABLE))
    wrong = []
    for case, line in statuses.items():
        if case not in expected:
            wrong.append(f"{case}: not in the table (now {line}); regenerate it with scripts/nki_library_report.py")
        elif expected[case].split(":")[0] != line.split(":")[0]:
            wrong.append(f"{case}: expected {expected[case]!r}, now {line!r}")
    assert not wrong, "\n".join(wrong)
