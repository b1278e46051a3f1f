"""The portability report's layer sections are registered by the layers (runtime/report_sections.py), not
found by module name: a registered section is collected and rendered; each layer's section is there exactly
when the layer has been imported, printed in the report's fixed order whatever the import order; and no
module of localneuron/report/ names another module in a string or imports one by name."""
import ast
import json
import subprocess
import sys

from import_graph import PACKAGE, ROOT, modules

from localneuron.report import portability
from localneuron.runtime import report_sections


def test_a_registered_section_is_collected_and_rendered():
    report_sections.register("test_section", lambda: {"answer": 42},
                             lambda data: [f"Test section: the answer is {data['answer']}"])
    try:
        data = portability.collect()
        assert data["test_section"] == {"answer": 42}
        text = portability.render(data)
        assert "Test section: the answer is 42" in text
        # a section the report's order does not name comes after the layers' sections, with them after the
        # device-wide lines
        lines = text.splitlines()
        transfers = next(i for i, line in enumerate(lines) if line.startswith("Host<->device transfers:"))
        assert lines.index("Test section: the answer is 42") > transfers
        assert [s.name for s in portability._used_layers()][-1] == "test_section"
        assert json.loads(portability.to_json(data))["test_section"] == {"answer": 42}
    finally:
        report_sections.unregister("test_section")
    assert "test_section" not in portability.collect()


PROBE = """
import sys
import localneuron
from localneuron.report import portability
for module in sys.argv[1:]:
    __import__(module)
print(" ".join(s.name for s in portability._used_layers()))
"""


def _sections_after_importing(*modules_: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", PROBE, *modules_], cwd=ROOT, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_each_layer_section_appears_once_the_layer_is_imported_in_the_report_order():
    # localneuron's own import loads the compiler (torch.neuron's compile metrics) and the c10d backend
    assert _sections_after_importing() == ["compile", "distributed"]
    # imported in the reverse of the report's order: printed in the report's order
    assert _sections_after_importing("localneuron.adaptive_eager.compile", "localneuron.integrations.hf",
                                     "localneuron.nki") == ["compile", "distributed", "nki", "huggingface",
                                                            "adaptive_eager"]
    # Adaptive Eager's engine alone adds nothing: only its code generator, loaded on the first fused run, means
    # the run fused
    assert _sections_after_importing("localneuron.adaptive_eager.engine") == ["compile", "distributed"]


def test_report_names_no_module_by_string():
    """A layer's section reaches the report by registering, so no module of localneuron/report/ holds a
    string naming a localneuron module, or imports a module by name at run time."""
    names = {name for name in modules() if "." in name}  # the root package is also the product's name
    found = []
    for path in sorted((PACKAGE / "report").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                named = {word.strip("'\"`(),:") for word in node.value.split()} & names
                found += [f"{path.name}:{node.lineno}: names {name}" for name in sorted(named)]
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                imported = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module]
                found += [f"{path.name}:{node.lineno}: imports importlib" for m in imported if m == "importlib"]
            elif isinstance(node, ast.Name) and node.id == "__import__":
                found.append(f"{path.name}:{node.lineno}: calls __import__")
    assert not found, "\n".join(found)
