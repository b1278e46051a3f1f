"""What a run of AWS's NKI Library tests costs before its first case (scripts/nki_library_tests.sh): the framework's
requirements are checked without pip when they are installed, the tree is found without importing torch, the marks
the library's conftest discovers by parsing its whole tree are kept per state of the tree, and `import nki` leaves
Dynamo unimported (tests/nki/test_nki_torch.py). The cache is read as untrusted: anything but what the plugin wrote,
for this state of the tree, is discovered again."""
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[2]
SHIM = PROJECT / "localneuron" / "nki" / "library_shim"
sys.path.insert(0, str(SHIM))
import nki_library_plugin as plugin  # noqa: E402
import requirements_met  # noqa: E402


def test_requirements_are_checked_by_distribution_name_without_pip(tmp_path):
    lines = ["# comment", "", "pytest  # the runner", "numpy>=1.0", "ml-dtypes; python_version > '3'",
             "no-such-distribution-localneuron", "another_absent_one[extra]==1.0"]
    assert requirements_met.missing(lines) == ["no-such-distribution-localneuron", "another_absent_one[extra]==1.0"]
    listed = tmp_path / "requirements.txt"
    listed.write_text("pytest\nnumpy\n")
    met = subprocess.run([sys.executable, str(SHIM / "requirements_met.py"), str(listed)], capture_output=True, text=True)
    assert met.returncode == 0 and met.stdout == ""
    listed.write_text("pytest\nno-such-distribution-localneuron\n")
    unmet = subprocess.run([sys.executable, str(SHIM / "requirements_met.py"), str(listed)], capture_output=True,
                           text=True)
    assert unmet.returncode == 1 and unmet.stdout.strip() == "no-such-distribution-localneuron"


def test_the_tree_is_found_by_the_module_run_as_a_script_without_torch(tmp_path):
    script = PROJECT / "localneuron" / "nki" / "library_tree.py"
    code = ("import runpy, sys; sys.argv = [sys.argv[1], sys.argv[2]]; runpy.run_path(sys.argv[0], run_name='__main__');"
            "print('torch' in sys.modules)")
    found = subprocess.run([sys.executable, "-c", code, str(script), str(tmp_path)], capture_output=True, text=True)
    assert found.returncode != 0 and "is not an NKI Library tree" in found.stderr  # an explicit path that is none
    tree = tmp_path / "lib"
    (tree / "src" / "nkilib_src" / "nkilib").mkdir(parents=True)
    (tree / "test").mkdir()
    (tree / "test" / "conftest.py").write_text("")
    found = subprocess.run([sys.executable, "-c", code, str(script), str(tree)], capture_output=True, text=True)
    assert found.returncode == 0 and found.stdout.split() == [str(tree.resolve()), "False"], found.stderr


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "test"
    (root / "integration").mkdir(parents=True)
    (root / "integration" / "test_a.py").write_text("class TestA: pass\n")
    return root


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setitem(plugin._options, "cache", str(folder))
    return folder


def counting(marks):
    calls = []

    def discover(test_root):
        calls.append(test_root)
        return dict(marks)
    return discover, calls


def test_marks_are_discovered_once_per_state_of_the_tree(tree, cache):
    discover, calls = counting({"fast": "Auto-discovered mark from @pytest_test_metadata"})
    cached = plugin.cached_mark_discovery(discover)
    assert cached(tree) == {"fast": "Auto-discovered mark from @pytest_test_metadata"} and len(calls) == 1
    assert cached(tree) == {"fast": "Auto-discovered mark from @pytest_test_metadata"} and len(calls) == 1
    assert oct((cache / plugin.MARKS_CACHE).stat().st_mode & 0o777) == "0o600"
    (tree / "integration" / "test_b.py").write_text("class TestB: pass\n")   # a new test file: discovered again
    assert cached(tree) and len(calls) == 2
    os.utime(tree / "integration" / "test_a.py", ns=(1, 1))                  # a changed one too
    assert cached(tree) and len(calls) == 3
    assert cached(tree) and len(calls) == 3


@pytest.mark.parametrize("content", [
    b"not json", b"[]", b'{"state": "x", "marks": {}}', b'{"state": null, "marks": {"a": 1}}', b"\xff\xfe",
])
def test_a_cache_file_the_plugin_did_not_write_for_this_tree_is_discovered_again(tree, cache, content):
    discover, calls = counting({"slow": "mark"})
    cached = plugin.cached_mark_discovery(discover)
    cached(tree)
    saved = json.loads((cache / plugin.MARKS_CACHE).read_bytes())
    if content.startswith(b'{"state": null'):  # this tree's state, with marks of the wrong type
        content = json.dumps({"state": saved["state"], "marks": {"a": 1}}).encode()
    (cache / plugin.MARKS_CACHE).write_bytes(content)
    assert cached(tree) == {"slow": "mark"} and len(calls) == 2


def test_a_symlinked_or_oversized_cache_is_not_read(tree, cache, tmp_path):
    discover, calls = counting({"slow": "mark"})
    cached = plugin.cached_mark_discovery(discover)
    cached(tree)
    target = tmp_path / "elsewhere.json"
    target.write_bytes((cache / plugin.MARKS_CACHE).read_bytes())
    (cache / plugin.MARKS_CACHE).unlink()
    (cache / plugin.MARKS_CACHE).symlink_to(target)
    before = target.read_bytes()
    assert cached(tree) == {"slow": "mark"} and len(calls) == 2   # never followed: discovered again
    assert target.read_bytes() == before                          # and nothing written through it
    (cache / plugin.MARKS_CACHE).unlink()
    (cache / plugin.MARKS_CACHE).write_bytes(b" " * (plugin.MARKS_CACHE_LIMIT + 1))
    assert cached(tree) == {"slow": "mark"} and len(calls) == 3


def test_without_a_cache_folder_or_with_an_unusable_one_the_library_discovers_as_it_does(tree, monkeypatch, tmp_path):
    discover, calls = counting({"slow": "mark"})
    cached = plugin.cached_mark_discovery(discover)
    monkeypatch.setitem(plugin._options, "cache", None)
    cached(tree), cached(tree)
    assert len(calls) == 2
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    monkeypatch.setitem(plugin._options, "cache", str(blocked / "cache"))
    assert cached(tree) == {"slow": "mark"} and len(calls) == 3


def test_only_the_library_conftest_discovery_is_wrapped():
    discover = lambda root: {}  # noqa: E731
    conftest = types.ModuleType("test.conftest")
    conftest.discover_pytest_test_metadata_marks = discover
    other = types.ModuleType("test.utils.pytest_test_metadata")
    other.discover_pytest_test_metadata_marks = discover
    plugin.pytest_plugin_registered(conftest, None)
    plugin.pytest_plugin_registered(other, None)
    assert conftest.discover_pytest_test_metadata_marks is not discover
    assert other.discover_pytest_test_metadata_marks is discover
