"""pytest plugin for AWS's NKI Library test framework on localneuron (`-p nki_library_plugin`).

The published tree (commit d2ad3a5) imports two modules from its conftest that the release left out:
`test.utils.scripts.remote_lock_scripts` (locks on remote Trainium hosts) and
`test.utils.perf_analysis_private` (analysis of hardware profiles). This plugin serves those names, and only
when the tree itself has no such file, so conftest imports; what they describe never runs in simulation
mode, and any use of it says so.

The release also validates simulation-mode outputs through `Orchestrator._rename_neff_outputs_to_python_names`,
which reads `self._compiled_kernel`, set only when a kernel is compiled (never in simulation mode), so every
simulation-mode test would end in AttributeError. The plugin gives the class that attribute's "no compiled
kernel" value, None, which the method already handles; nothing else of the framework is changed.
"""
import importlib.abc
import importlib.util
import sys
import types
from enum import Enum

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
