"""pytest plugin for AWS's NKI Library test framework on localneuron (`-p nki_library_plugin`).

The published tree (commit d2ad3a5) imports two modules from its conftest that the release left out:
`test.utils.scripts.remote_lock_scripts` (locks on remote Trainium hosts) and
`test.utils.perf_analysis_private` (analysis of hardware profiles). This plugin serves those names, and only
when the tree itself has no such file, so conftest imports; what they describe never runs in simulation
mode, and any use of it says so.

The release also validates simulation-mode outputs through `Orchestrator._rename_neff_outputs_to_python_names`,
which reads `self._compiled_kernel`, set only when a kernel is compiled (never in simulation mode), so every
simulation-mode test would end in AttributeError. The plugin gives the class that attribute's "no compiled
kernel" value, None, which the method already handles.

Start-up: the conftest's discovery of the marks its test classes declare parses the whole tree at each session's
start; the plugin keeps its result per state of the tree (cached_mark_discovery). Nothing else of the framework is
changed.
"""
import importlib.abc
import importlib.util
import os
import sys
import types
from enum import Enum

import pytest

_REASON = ("{} is not in the published NKI Library tree (it serves runs on Trainium hosts); localneuron runs "
           "the library in --test-mode simulation only")


def _unavailable(module):
    def fail(*args, **kwargs):
        raise RuntimeError(_REASON.format(module))
    return fail


class LockStatus(Enum):
    ALLOCATED = "allocated"
    RELEASED = "released"
    DRAINED = "drained"
    UNDRAINED = "undrained"
    DRAINING = "draining"
    NO_CORES = "no_cores"
    ERROR = "error"
    FLOCK_TIMEOUT = "flock_timeout"

    exit_code = property(_unavailable("test/utils/scripts/remote_lock_scripts.py"))
    from_exit_code = classmethod(_unavailable("test/utils/scripts/remote_lock_scripts.py"))


class LockResult:
    __init__ = _unavailable("test/utils/scripts/remote_lock_scripts.py")
    from_json = classmethod(_unavailable("test/utils/scripts/remote_lock_scripts.py"))


# module -> the names it provides (None: a package)
MISSING_MODULES = {
    "test.utils.scripts": None,
    "test.utils.scripts.remote_lock_scripts": {"LockStatus": LockStatus, "LockResult": LockResult},
    "test.utils.perf_analysis_private": {"analyze_trace": _unavailable("test/utils/perf_analysis_private.py")},
}


class _MissingModuleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Last on sys.meta_path: only names no other finder found reach it."""

    def find_spec(self, name, path=None, target=None):
        if name in MISSING_MODULES:
            return importlib.util.spec_from_loader(name, self, is_package=MISSING_MODULES[name] is None)
        return None

    def create_module(self, spec):
        module = types.ModuleType(spec.name, _REASON.format(spec.name))
        if MISSING_MODULES[spec.name] is None:
            module.__path__ = []
        else:
            vars(module).update(MISSING_MODULES[spec.name])
        return module

    def exec_module(self, module):
        pass


sys.meta_path.append(_MissingModuleFinder())


# --- start-up: the tree's marks, discovered once per version of its test files ------------------------------
MARKS_CACHE = "nki-library-marks.json"
MARKS_CACHE_LIMIT = 1 << 20


def _tree_state(test_root) -> str:
    """A digest of every Python file under the test folder by path, size and modification time: what the library's
    mark discovery reads."""
    import hashlib
    from pathlib import Path

    digest = hashlib.sha256()
    for path in sorted(Path(test_root).rglob("*.py")):
        st = path.stat()
        digest.update(f"{path.relative_to(test_root)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _checked_marks(data: bytes, state: str):
    """The marks a cache file holds for this state of the tree, or None (another state, or not what this plugin
    writes: the file is read as untrusted)."""
    import json

    try:
        saved = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not (isinstance(saved, dict) and saved.get("state") == state and isinstance(saved.get("marks"), dict)):
        return None
    marks = saved["marks"]
    return marks if all(isinstance(k, str) and isinstance(v, str) for k, v in marks.items()) else None


def cached_mark_discovery(discover):
    """The library's conftest registers the pytest marks its test classes declare by parsing every test file of the
    tree, twice, at each session's start (about 2 s of a one-file run's start-up). The result depends only on those
    files, so it is kept in the folder --nki-library-cache names (scripts/nki_library_tests.sh gives one) beside a
    digest of the tree, and discovered again when a file changes; without that option, every time."""
    import json

    def marks(test_root):
        folder = _options.get("cache")
        if folder is None:
            return discover(test_root)
        from localneuron.runtime import checked_files

        state = _tree_state(test_root)
        try:
            directory = checked_files.open_root(folder, private=True)
        except (OSError, checked_files.Untrusted):
            return discover(test_root)
        try:
            data = checked_files.read_regular(directory, MARKS_CACHE, private=True)
            found = _checked_marks(data, state) if data is not None and len(data) <= MARKS_CACHE_LIMIT else None
            if found is None:
                found = discover(test_root)
                checked_files.write_atomic(directory, MARKS_CACHE, json.dumps({"state": state, "marks": found}).encode())
            return found
        except (OSError, checked_files.Untrusted):  # a cache it cannot use: discover as the library does
            return discover(test_root)
        finally:
            os.close(directory)
    return marks


_options: dict = {}


def pytest_addoption(parser):
    parser.addoption("--nki-library-cache", default=None,
                     help="a folder of this user's where the plugin keeps the tree's discovered marks")


@pytest.hookimpl(tryfirst=True)  # before the library's conftest discovers its marks
def pytest_configure(config):
    _options["cache"] = config.getoption("nki_library_cache")


def pytest_plugin_registered(plugin, manager):
    if isinstance(plugin, types.ModuleType) and callable(getattr(plugin, "discover_pytest_test_metadata_marks", None)) \
            and plugin.__name__.endswith("conftest"):
        plugin.discover_pytest_test_metadata_marks = cached_mark_discovery(plugin.discover_pytest_test_metadata_marks)


def pytest_sessionstart(session):
    orchestrator = sys.modules.get("test.utils.test_orchestrator")
    if orchestrator is not None and not hasattr(orchestrator.Orchestrator, "_compiled_kernel"):
        orchestrator.Orchestrator._compiled_kernel = None


# --- what each test's kernels cost (read by scripts/nki_library_report.py) -----------------------------
ESTIMATES_FILE = "nki_estimates.jsonl"


def pytest_runtest_setup(item):
    from localneuron.nki import clear_kernel_calls
    clear_kernel_calls()


def pytest_runtest_makereport(item, call):
    if call.when != "call":
        return
    import json
    import os

    from localneuron.nki import kernel_calls
    from localneuron.runtime.checked_files import write_output
    calls = kernel_calls()
    if not calls:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    # appended in a checked directory, never through a symlink planted at the name (runtime/checked_files.py)
    write_output(f"{worker}-{ESTIMATES_FILE}",
                 json.dumps({"test": item.nodeid, "seconds": call.duration,
                             "kernels": [{k: c[k] for k in ("name", "target", "estimated_ns", "bottleneck")}
                                         for c in calls]}) + "\n",
                 "the NKI Library estimates", append=True)
