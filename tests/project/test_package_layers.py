"""The layers of localneuron: the packages under localneuron/ import only downwards, in the order of
docs/architecture.md's "Layers" table (the one place the order is written), read from every import
statement (top-level and inside functions); so the package graph has no cycle. The table and README.md's
repository map name exactly the packages that exist."""
import re

from import_graph import EXTENSION, PACKAGE, ROOT, cycle, module_graph

ROOT_PACKAGE = "localneuron/__init__.py"  # the root package's own module, which wires the layers together


def _table_rows() -> list[list[str]]:
    """The folders each row of the Layers table names, bottom to top, as written in its first column."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    return [re.findall(r"`([^`]+)`", line.split("|")[1]) for line in section.splitlines()
            if line.startswith("| `")]


def _package(module: str) -> str:
    """The layer a module belongs to, named as the table names it."""
    if module == EXTENSION:
        return "csrc/"
    if module == "localneuron":
        return ROOT_PACKAGE
    return f"localneuron/{module.split('.')[1]}/"


def _levels() -> dict[str, int]:
    return {folder: level for level, row in enumerate(_table_rows()) for folder in row}


def _package_edges() -> dict[tuple[str, str], list[str]]:
    """(importing package, imported package) -> the module imports that make the edge."""
    edges: dict = {}
    for name, imported in module_graph().items():
        for other in imported:
            if _package(name) != _package(other):
                edges.setdefault((_package(name), _package(other)), []).append(f"{name} imports {other}")
    return edges


def test_every_package_is_a_layer_of_the_table():
    levels = _levels()
    packages = {_package(name) for name in module_graph()}
    assert not packages - set(levels), f"not in docs/architecture.md's Layers table: {sorted(packages - set(levels))}"


def test_package_graph_has_no_cycle():
    graph: dict = {}
    for importer, imported in _package_edges():
        graph.setdefault(importer, set()).add(imported)
    found = cycle(graph)
    edges = _package_edges()
    assert found is None, "package cycle " + " -> ".join(found) + ":\n" + "\n".join(
        f"  {a} -> {b}: {', '.join(sorted(edges[a, b]))}" for a, b in zip(found, found[1:]))


def test_no_package_imports_a_layer_above_it():
    levels = _levels()
    upward = [f"{why} ({importer} is below {imported} in docs/architecture.md's Layers table)"
              for (importer, imported), whys in sorted(_package_edges().items())
              if levels.get(imported, -1) > levels.get(importer, -1) for why in sorted(whys)]
    assert not upward, f"{len(upward)} imports of a layer above:\n" + "\n".join(upward)


def _existing_packages() -> set[str]:
    return {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


def test_layers_table_names_every_package_and_only_those():
    named = {folder.split("/")[1] for row in _table_rows() for folder in row
             if folder.startswith("localneuron/") and folder.endswith("/")}
    assert named == _existing_packages(), (f"missing from the table: {sorted(_existing_packages() - named)}; "
                                           f"named but absent: {sorted(named - _existing_packages())}")


def test_readme_repository_map_names_every_package_and_only_those():
    text = (ROOT / "README.md").read_text()
    block = text.split("\n## Repository map\n", 1)[1].split("```")[1]
    inside = block.split("\nlocalneuron/", 1)[1].split("\ncsrc/", 1)[0]
    named = set(re.findall(r"^  (\w+)/", inside, re.MULTILINE))
    assert named == _existing_packages(), (f"missing from the map: {sorted(_existing_packages() - named)}; "
                                           f"named but absent: {sorted(named - _existing_packages())}")
