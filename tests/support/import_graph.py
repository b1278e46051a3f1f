"""The import graph of the localneuron package, read from its sources: every import statement, top-level
and inside functions, resolved to the package's modules. The C++ extension `localneuron._C` has no Python
source but is a module of its own (the bottom layer, csrc/), so importing it is an edge to it, not to the
root package whose `__init__` wires every layer."""
import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "localneuron"
EXTENSION = "localneuron._C"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path | None]:
    """Module name -> source file; the extension maps to None (it has no source to read)."""
    return {**{_module_name(p): p for p in PACKAGE.rglob("*.py")}, EXTENSION: None}


def imports(name: str, path: Path | None, known: dict) -> set[str]:
    """Modules of the package this one imports. `from package import name` is an edge to the
    submodule when `name` is one, else to the package itself."""
    if path is None:
        return set()
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    edges = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            edges.update(a.name for a in node.names if a.name in known)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                if f"{base}.{alias.name}" in known:
                    edges.add(f"{base}.{alias.name}")
                elif base in known:
                    edges.add(base)
    edges.discard(name)
    return edges


def module_graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(name, path, known) for name, path in known.items()}


def cycle(graph: dict) -> list | None:
    """One circle of the graph, as [a, b, ..., a], or None."""
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None
