"""No import cycles inside localneuron: the module graph, read from every import statement
(top-level and inside functions), has no circle, and each module imports on its own in a fresh
interpreter."""
import subprocess
import sys

import pytest
from import_graph import ROOT, cycle, module_graph


def test_module_graph_has_no_cycles():
    graph = module_graph()
    # a package's own __init__ importing its submodules is how packages work, not a cycle
    for name in graph:
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")}
    assert cycle(graph) is None, f"import cycle: {' -> '.join(cycle(graph))}"


def test_cycle_detector_finds_a_cycle():
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


# the modules that used to import each other in a circle, each imported first
@pytest.mark.parametrize("module", ["localneuron.nki.activations", "localneuron.nki.alu", "localneuron.nki.kernel",
                                    "localneuron.nki.torch_integration"])
def test_module_imports_first_in_a_fresh_interpreter(module):
    done = subprocess.run([sys.executable, "-c", f"import {module}"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
