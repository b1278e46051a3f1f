"""localneuron/cli/ only parses arguments: each command's work (running the script, collecting, printing and
writing the report, the --strict check, info, the estimate) lives in the layer that does it, behind one entry
point, and cli/ builds the argparse parsers, checks the arguments and calls that entry point. Read from the
sources, a module under localneuron/cli/:

- imports only argparse, sys (for sys.argv and sys.exit alone), other cli modules and the entry-point modules
  of ENTRY_POINTS, and only at its top (a function importing a module is doing that module's work);
- calls nothing but argparse's parser methods, a few builtins and str/list/dict methods that reshape the
  argument list, functions of cli/ itself, and the entry-point modules' functions and option classes;
- has no try or with statement (catching errors and holding resources is running, not parsing).

A cli module that prints, opens a file, runs a script or catches an error fails here, naming file:line."""
import ast
import builtins

from import_graph import PACKAGE

CLI = PACKAGE / "cli"
ENTRY_POINTS = {
    "localneuron.report.run": "`localneuron run`: runs the script, prints and writes the report, --strict",
    "localneuron.report.strict": "the --strict check (its exit status is quoted in run's --help)",
    "localneuron.report.info": "`localneuron info` and `info --ops`",
    "localneuron.estimate.command": "`localneuron estimate`: checks the options' combination, prices, prints",
}
STDLIB = {"argparse": {"ArgumentParser", "REMAINDER", "SUPPRESS"}, "sys": {"argv", "exit"}}  # module -> attributes used
PARSER_METHODS = {"add_subparsers", "add_parser", "add_argument", "add_mutually_exclusive_group",
                  "add_argument_group", "set_defaults", "parse_args", "error", "handler"}  # handler: the dispatch
RESHAPING_METHODS = {"startswith", "split", "index", "append", "items", "get"}  # on the argument list and its words
BUILTINS = {"list", "tuple", "dict", "set", "len", "any", "all", "iter", "next", "vars", "isinstance", "range",
            "enumerate", "zip", "str", "int"}


def _bound_modules(tree: ast.Module) -> dict[str, str]:
    """Name -> module, for the module-level imports of a cli module."""
    bound = {}
    for node in tree.body:
        if isinstance(node, ast.Import):
            bound.update({a.asname or a.name: a.name for a in node.names})
        elif isinstance(node, ast.ImportFrom):
            bound.update({a.asname or a.name: f"{node.module}.{a.name}" for a in node.names})
    return bound


def violations(source: str, filename: str, cli_functions: set[str]) -> list[str]:
    """What in `source` is not parsing, one `filename:line: why` each."""
    tree = ast.parse(source)
    bound = _bound_modules(tree)
    entry = {name for name, module in bound.items() if module in ENTRY_POINTS}
    found = []

    def flag(node, why):
        found.append(f"{filename}:{node.lineno}: {why}")

    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            if node not in tree.body:
                flag(node, "imports inside a function")
            for alias in node.names:
                module = alias.name if isinstance(node, ast.Import) else f"{node.module}.{alias.name}"
                if not (module in STDLIB or module in ENTRY_POINTS or module.startswith("localneuron.cli.")):
                    flag(node, f"imports {module}, neither argparse/sys, a cli module nor an entry point")
        elif isinstance(node, (ast.Try, ast.With)):
            flag(node, f"a {type(node).__name__.lower()} statement")
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in STDLIB:
            if node.attr not in STDLIB[node.value.id]:
                flag(node, f"uses {node.value.id}.{node.attr}")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                if not (func.id in BUILTINS or func.id in cli_functions or func.id in entry):
                    flag(node, f"calls {func.id}()")
            elif isinstance(func, ast.Attribute):
                owner = func.value.id if isinstance(func.value, ast.Name) else None
                if owner in entry or owner in STDLIB:
                    continue  # an entry point's function or class; sys and argparse are checked above
                if owner is not None and bound.get(owner, "").startswith("localneuron.cli."):
                    continue
                if func.attr not in PARSER_METHODS | RESHAPING_METHODS:
                    flag(node, f"calls .{func.attr}()")
            else:
                flag(node, "calls something that is not a name or a method")
    return found


def _cli_sources() -> dict[str, str]:
    return {p.relative_to(PACKAGE.parent).as_posix(): p.read_text() for p in sorted(CLI.glob("*.py"))}


def _cli_functions(sources: dict) -> set[str]:
    return {node.name for source in sources.values() for node in ast.parse(source).body
            if isinstance(node, ast.FunctionDef)}


def test_cli_modules_only_parse_arguments_and_call_entry_points():
    sources = _cli_sources()
    functions = _cli_functions(sources)
    found = [line for filename, source in sources.items() for line in violations(source, filename, functions)]
    assert not found, "localneuron/cli/ does more than parse arguments:\n" + "\n".join(found)


def test_the_entry_points_exist_and_cli_uses_each():
    used = set()
    for source in _cli_sources().values():
        used |= set(_bound_modules(ast.parse(source)).values())
    for module in ENTRY_POINTS:
        assert (PACKAGE.parent / (module.replace(".", "/") + ".py")).is_file(), module
    assert sorted(set(ENTRY_POINTS) - used) == [], "entry points no cli module imports"


def test_the_check_finds_work_done_in_cli():
    work = '''
import os
import sys
import runpy
from localneuron.report import run as report_run

def _run(args):
    import torch
    try:
        runpy.run_path(args.script)
    except SystemExit:
        pass
    print("report", file=sys.stderr)
    with open("x") as f:
        f.write("y")
    return report_run.run(args)
'''
    found = violations(work, "cli/x.py", {"_run"})
    for why in ("imports os", "imports runpy", "imports inside a function", "a try statement", "uses sys.stderr",
                "calls print()", "a with statement", "calls open()", "calls .write()"):
        assert any(why in line for line in found), (why, found)
    assert not any("report_run" in line or "localneuron.report.run" in line for line in found), found
    assert set(dir(builtins)) >= BUILTINS
