import os
import sys
import warnings

import pytest
import torch

# Helper modules shared by tests (sweeps, launchers, tiny models) live in tests/support/, apart from the tests.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "support"))

# Inductor checks, once per process, that it can build and load a test library for each vector extension the CPU
# reports, in its kernel directory; localneuron points that directory into the compile cache, and the compile cache's
# tests give every process a fresh one, so each such process spent six seconds of g++ on those checks before its
# first graph (9.2 of a child's 10.8 s compile, measured with cProfile). The tests take the extensions the CPU reports
# (the same choice, avx512 here) in this process and the processes it starts; what is tested is localneuron's use of
# the kernels, not the host's C++ compiler.
os.environ["TORCHINDUCTOR_VEC_ISA_OK"] = "1"

import localneuron  # noqa: F401  (the device, also when autoload is disabled)
import torch_neuronx
from torch._inductor import config as inductor_config

inductor_config.cpp.vec_isa_ok = True


@pytest.fixture
def tracking():
    torch_neuronx.clear_op_tracking()
    yield torch_neuronx
    torch_neuronx.clear_op_tracking()


@pytest.fixture
def host_cc(monkeypatch):
    """Streams of their own: TorchNeuron's new streams are its default stream unless host collective communication is
    enabled (localneuron/device/streams.py); tests of how streams order work ask for it."""
    monkeypatch.setenv("NEURON_RT_ENABLE_HOST_CC", "1")


@pytest.fixture
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def to_neuron(*tensors):
    return [t.to("neuron") for t in tensors]


@pytest.fixture(autouse=True)
def _back_on_device_zero():
    yield
    torch.neuron.set_device(0)


@pytest.fixture(autouse=True, scope="module")
def _fresh_dynamo_per_file():
    """Dynamo keeps compiled graphs per code object, and every nn.Sequential shares one forward: after eight input
    shapes of it in one worker process (config.recompile_limit) a later test's torch.compile silently runs eager.
    Which files share a worker depends on pytest-xdist's scheduling, so each file starts with dynamo's caches empty.
    (Only if some earlier file imported dynamo: importing it costs a second.)"""
    if "torch._dynamo" in sys.modules:
        torch._dynamo.reset()
    yield


@pytest.fixture(autouse=True)
def _no_failure_left_untold():
    """A test must not leave a failed queued op that no thread was told of: the test process would exit with status
    1 when the session ends (csrc/queue/held_errors.h), far from the test that caused it."""
    yield
    from localneuron import _C

    _C.drain_all_queues()
    untold = _C.take_unreported_failures()
    assert not untold, "the test left queued failures no synchronisation point reported:\n" + "\n".join(untold)


# Tests whose behaviour does not depend on the execution mode run once, in the asynchronous pass; the blocking pass
# of scripts/test.sh deselects them (-m "not mode_independent"). Two kinds, each entry with its reason:
# DEVICE_FREE runs no op on the device in the test's process (checked: such a test that runs one fails), and
# ABOVE_THE_QUEUE is code that issues ordinary device ops and adds nothing the mode changes: how the queue runs
# those ops (order, errors, memory, events, collectives, compiled launches) is what device/, execution/, ops/,
# compile/, distributed/ and profiler/ test in both modes, and execution/test_queue_differential.py compares the
# modes op for op.
DEVICE_FREE = {
    # before "project/", the first entry that names a test being the one reported
    "project/test_torchneuron_suite.py": "TorchNeuron's own tests, in processes of their own that each set the mode "
                                         "they check",
    "project/": "checks of the repository's own sources (the environment table, the import layers)",
    "estimate/test_calibration.py": "re-estimates the published rows with the cost model's recipe path",
    "compile/test_kernel_home.py": "the life of a process's private kernel directory: files, locks and processes "
                                   "of its own (the one compile runs in a child)",
    "ops/test_lowering_errors.py::test_blocking_mode_": "the lowering's errors in a fresh interpreter that sets the mode",
    "ops/test_lowering_errors.py::test_an_index_out_of_bounds_is_": "aten::index's out-of-bounds error in fresh "
                                                                     "interpreters that set the mode",
    "ops/test_lowering_errors.py::test_several_held_failures_": "held failures in a fresh interpreter that sets the "
                                                                 "mode",
    "execution/test_queue_signals.py": "the queue workers' signal masks, read in fresh interpreters that set the mode",
    "device/test_torch_neuronx_utils.py": "torch_neuronx.utils read in fresh interpreters that set the mode",
    "nki/test_nki_capacity.py": "NKI kernels on the simulator's numpy memories",
    "nki/test_nki_constraints.py": "NKI kernels on the simulator's numpy memories",
    "nki/test_nki_cycle_model.py": "the NKI cycle model",
    "nki/test_nki_isa.py": "NKI instructions on the simulator's numpy memories",
    "nki/test_nki_language.py": "the NKI language on the simulator's numpy memories",
    "nki/test_nki_library.py": "AWS's NKI Library tests, in a process of their own, on the simulator's numpy memories",
    "nki/test_nki_targets.py": "NKI generations and their limits on the simulator",
    "nki/test_nki_uninitialised.py": "NKI kernels on the simulator's numpy memories",
}
ABOVE_THE_QUEUE = {
    "compile/test_compile_cache.py": "the persistent compile cache: host files written and read while a graph compiles, "
                                     "before it is queued; compiled launches are test_compile_graphs' and "
                                     "test_compile_parity's, in both modes",
    "compile/test_compile_cache_security.py": "attacks on the compile cache's files and locks, met while a graph "
                                              "compiles, before anything is queued",
    "compile/test_compile_progress.py": "the progress lines a compile prints, before its graph is queued",
    "compile/test_metric_tables.py": "the graph_stats table written at exit from rows compiles record on the host, in "
                                     "fresh interpreters",
    "device/test_metrics.py::test_enabled_at_start_up_": "the persistent cache's counters in fresh interpreters: "
                                                          "graphs' pieces stored and loaded while compiling, before "
                                                          "anything is queued",
    "device/test_metrics.py::test_a_bad_start_up_value_": "a start-up value refused when the metrics are first read",
    "distributed/test_distributed_torchrun.py": "torchrun's two-node rendezvous on loopback and each rank's report "
                                                "file; the collectives and training its ranks run are "
                                                "test_distributed_collectives' and _parallelism's, in both modes",
    "estimate/": "models traced for the cost model: what is priced is the op sequence, the same in both modes",
    "nki/": "an nki_op kernel is one device op to the queue; the kernel itself runs on the simulator",
    "integrations/": "Hugging Face, vLLM and TorchTitan adapters: device placement, memory budgets, weight loading",
    "sweeps/": "op-by-op results against the CPU: the host kernel an op runs is the same in both modes",
    "distributed/test_distributed_parallelism.py::test_compiled_": "compiled graphs on ranks: in blocking mode no "
                                                                      "collective is still in flight when a graph "
                                                                      "launches, which is what these tests add to the "
                                                                      "eager ranks here and to test_compile_*'s "
                                                                      "launches, both of which run in both modes",
    "profiler/test_source_line_time.py": "the time by source line, credited from each op's priced record when it "
                                         "is issued (runtime/line_time.py), before the queue: the same in both modes",
    "report/": "the portability report and its output files, built from counters both modes keep alike",
    "training/": "end-to-end training examples whose ops the layer tests cover",
}
MODE_INDEPENDENT = {**ABOVE_THE_QUEUE, **DEVICE_FREE}


def _matching(table: dict, item) -> str | None:
    """The entry that names the item: a folder, a file, or a file's tests by the start of their name (file::prefix)."""
    relative = os.path.relpath(str(item.fspath), os.path.dirname(os.path.abspath(__file__))).replace(os.sep, "/")
    return next((prefix for prefix in table if f"{relative}::{item.name}".startswith(prefix)), None)


def _shares_a_module_fixture(item) -> bool:
    """Whether the test uses a module-scoped fixture: scripts/test.sh runs with --dist loadgroup, and such a file's
    tests are one group, so the fixture (a sweep, a calibration, runs of a script on ranks) is built by one worker
    instead of by each worker that gets one of the tests."""
    return any(definition.scope == "module"
               for definitions in item._fixtureinfo.name2fixturedefs.values() for definition in definitions)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's, which reads the groups
def pytest_collection_modifyitems(items):
    here = os.path.dirname(os.path.abspath(__file__))
    stale = [prefix for prefix in MODE_INDEPENDENT if not os.path.exists(os.path.join(here, prefix.split("::")[0]))]
    matched = set()
    for item in items:
        entry = _matching(MODE_INDEPENDENT, item)
        if entry is not None:
            item.add_marker(pytest.mark.mode_independent)
            matched.add(entry)
        if not item.get_closest_marker("xdist_group") and _shares_a_module_fixture(item):
            item.add_marker(pytest.mark.xdist_group(os.path.relpath(str(item.fspath), here)))
    # an entry naming tests by name must name some whenever its file was collected
    collected = {os.path.relpath(str(item.fspath), here).replace(os.sep, "/") for item in items}
    stale += [prefix for prefix in MODE_INDEPENDENT
              if "::" in prefix and prefix.split("::")[0] in collected and prefix not in matched]
    if stale:
        raise pytest.UsageError(f"tests/conftest.py names tests that do not exist: {stale}")


def _deselects_mode_independent(config) -> bool:
    """Whether the -m expression deselects every test marked mode_independent, whatever other markers it has
    (scripts/test.sh's blocking pass: "not slow and not mode_independent")."""
    from _pytest.mark.expression import Expression  # pytest's own evaluator of -m, so the reading is the same

    try:
        expression = Expression.compile(config.option.markexpr or "")
    except Exception:  # noqa: BLE001  (a bad -m is pytest's to report; collect as usual)
        return False
    if not config.option.markexpr:
        return False
    return not any(expression.evaluate(lambda name, **_: name == "mode_independent" or others)
                   for others in (False, True))


def pytest_ignore_collect(collection_path, config):
    """A pass that deselects the mode-independent tests does not import their files either: importing them (the
    Hugging Face modules, the sweeps' tables) cost each of the blocking pass's processes three CPU seconds."""
    if not _deselects_mode_independent(config):
        return None
    relative = os.path.relpath(str(collection_path), os.path.dirname(os.path.abspath(__file__))).replace(os.sep, "/")
    if collection_path.is_dir():
        relative += "/"
    return True if any(relative.startswith(prefix) for prefix in MODE_INDEPENDENT) else None


def _device_work() -> tuple:
    from localneuron import _C

    return _C.executor_counters(), _C.transfer_counters()["copies"]


@pytest.fixture(autouse=True)
def _device_free_tests_run_nothing_on_the_device(request):
    entry = _matching(DEVICE_FREE, request.node)
    if entry is None:
        yield
        return
    before = _device_work()
    yield
    assert _device_work() == before, (
        f"{request.node.nodeid} runs ops on the neuron device: move its entry {entry!r} from DEVICE_FREE in "
        f"tests/conftest.py (to ABOVE_THE_QUEUE with a reason, or out of both so it runs in both modes)")
