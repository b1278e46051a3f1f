"""One record per op: what the device decides about an ATen op is written once, in its record
(localneuron/ops/op_records.py), and every other module derives its sets from the records. So no module
outside the record keys a table by op name: no Python dict, set, list or tuple literal there holds two or
more qualified op names ("aten::add", "prims::convert_element_type", "c10d::allreduce_"), or three or more
strings that are all bare op names (the name without its namespace: "isfinite", "clone", "allreduce_", as a
dispatch mode reads func._schema.name after the "::"), and no C++ source initializes a table of them (the C++
core receives its ops from the records at registration, e.g. the unboxed fast ops). A bare name is an op's
when the dispatcher holds an op of that name in the aten, c10d or _c10d_functional namespace.

Not op tables, so not checked: compiler/partition.py's EAGER_NAMESPACES (keyed by op namespace,
"localneuron_nki": every op of a library) and EAGER_HIGHER_ORDER_OPS (keyed by higher-order operator,
"flex_attention"). Neither key is an ATen op: a namespace has no schema or overload, and a higher-order
operator is a Python object the dispatcher's op table does not hold, so neither fits a record keyed
"aten::name", and only the compiler's partitioner reads them.

Literals of bare names that are not op tables (BARE_NAMES_ALLOWED, each with its reason): nki/activations.py's
VALID_RANGES is keyed by NKI activation functions (nl.log, nl.sin, nl.arctan, nl.sqrt...), the ScalarE
approximations whose documented input ranges it holds; their names coincide with ATen ops', but no ATen op
reaches them (a kernel calls them by their nki.language name) and their ranges are facts of the engine's
tables, not of an op. Collective kind vocabularies (costmodel/collectives.py's KINDS, distributed/checks.py's
SHAPES_AGREE_ON: "all_gather", "reduce_scatter", the names c10d's ProcessGroup methods and the distributed report
use) are words, not op keys, and are not flagged: "all_gather" is no op's name."""
import ast
import re

import torch

from import_graph import ROOT

RECORDS = "localneuron/ops/op_records.py"
OP_NAME = re.compile(r"^(aten|prims|c10d|_c10d_functional)::[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?$")
# the namespaces whose ops a dispatch mode may key a table by their bare name
BARE_NAMESPACES = ("aten", "c10d", "_c10d_functional")
BARE_OP_NAMES = frozenset(q.partition("::")[2].partition(".")[0] for q in torch._C._dispatch_get_all_op_names()
                          if q.partition("::")[0] in BARE_NAMESPACES)
BARE_TABLE_SIZE = 3  # fewer bare strings than this are too often words that are also op names ("all", "any")
# (module, the name the literal is assigned to) -> why its bare op names are not an op table
BARE_NAMES_ALLOWED = {
    ("localneuron/nki/activations.py", "VALID_RANGES"): "keyed by NKI activation functions (ScalarE's tables), "
                                                        "which no ATen op reaches: see the module docstring",
}

# A C++ string literal that is exactly an op name ("aten::copy_"), outside a comment.
CPP_OP_LITERAL = re.compile(r'"(?:aten|prims)::[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?"')
# The C++ uses of an op name that are not tables, each with why it is allowed:
CPP_ALLOWED = {
    "TORCH_SELECTIVE_NAME(": "a kernel registration for that one op (m.impl), not a table of facts",
    ".impl(": "a kernel registration for that one op, not a table of facts",
    "findSchemaOrThrow(": "a lookup of the one operator handle the code calls, not a table of facts",
}


def _python_files():
    for path in sorted((ROOT / "localneuron").rglob("*.py")):
        if path.relative_to(ROOT).as_posix() != RECORDS:
            yield path


def _op_names(node: ast.AST) -> list[str]:
    """The op-name strings a collection literal holds as its keys (dict) or elements."""
    if isinstance(node, ast.Dict):
        items = node.keys
    elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        items = node.elts
    else:
        return []
    return [i.value for i in items
            if isinstance(i, ast.Constant) and isinstance(i.value, str) and OP_NAME.match(i.value)]


def _bare_op_names(node: ast.AST) -> list[str]:
    """The strings a collection literal holds as its keys (dict) or elements, if there are BARE_TABLE_SIZE or more
    and every one is an op's bare name ("isnan", "allreduce_"); else none."""
    if isinstance(node, ast.Dict):
        items = node.keys
    elif isinstance(node, (ast.Set, ast.List, ast.Tuple)):
        items = node.elts
    else:
        return []
    strings = [i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)]
    return strings if len(strings) >= BARE_TABLE_SIZE and all(s in BARE_OP_NAMES for s in strings) else []


def _assigned_names(tree: ast.AST) -> dict[int, str]:
    """id of a literal -> the name it is assigned to (NAME = literal, NAME: type = literal)."""
    names = {}
    for node in ast.walk(tree):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) \
            else []
        for target in targets:
            if isinstance(target, ast.Name) and node.value is not None:
                names[id(node.value)] = target.id
    return names


def _listed(names: list[str]) -> str:
    return f"{', '.join(names[:3])}{', ...' if len(names) > 3 else ''}"


def python_op_tables() -> list[str]:
    found = []
    for path in _python_files():
        module = path.relative_to(ROOT).as_posix()
        tree = ast.parse(path.read_text(), str(path))
        assigned = _assigned_names(tree)
        for node in ast.walk(tree):
            names = _op_names(node)
            if len(names) >= 2:
                found.append(f"{module}:{node.lineno}: {type(node).__name__.lower()} of "
                             f"{len(names)} op names ({_listed(names)})")
            bare = _bare_op_names(node)
            if bare and (module, assigned.get(id(node))) not in BARE_NAMES_ALLOWED:
                found.append(f"{module}:{node.lineno}: {type(node).__name__.lower()} of "
                             f"{len(bare)} bare op names ({_listed(bare)})")
    return found


def _strip_comments(source: str) -> str:
    """The C++ source with its comments blanked (line numbers kept); string literals are left as they are."""
    out, i, n = [], 0, len(source)
    while i < n:
        if source.startswith("//", i):
            j = source.find("\n", i)
            i = n if j < 0 else j
        elif source.startswith("/*", i):
            j = source.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * source.count("\n", i, j))
            i = j
        elif source[i] == '"':
            j = i + 1
            while j < n and source[j] != '"':
                j += 2 if source[j] == "\\" else 1
            out.append(source[i:j + 1])
            i = j + 1
        else:
            out.append(source[i])
            i += 1
    return "".join(out)


def cpp_op_tables() -> list[str]:
    found = []
    for path in sorted(p for p in (ROOT / "csrc").rglob("*") if p.suffix in (".cpp", ".h")):
        for lineno, line in enumerate(_strip_comments(path.read_text()).splitlines(), 1):
            if CPP_OP_LITERAL.search(line) and not any(use in line for use in CPP_ALLOWED):
                found.append(f"{path.relative_to(ROOT)}:{lineno}: {line.strip()}")
    return found


def test_the_allowed_bare_name_literals_exist():
    """Each allow-list entry names a literal that is still there (a stale entry would allow a table added later)."""
    for module, name in BARE_NAMES_ALLOWED:
        tree = ast.parse((ROOT / module).read_text())
        assigned = _assigned_names(tree)
        assert any(_bare_op_names(node) for node in ast.walk(tree) if assigned.get(id(node)) == name), \
            (module, name)


def test_no_python_module_outside_the_records_keys_a_table_by_op_name():
    found = python_op_tables()
    assert not found, ("tables keyed by ATen op name outside " + RECORDS + " (make the fact a field of the op "
                       "record and derive the set from the records):\n" + "\n".join(found))


def test_no_cpp_table_of_op_names():
    found = cpp_op_tables()
    assert not found, ("C++ op names outside a registration or a schema lookup (hand the ops down from the "
                       "records at registration instead):\n" + "\n".join(found))


def test_the_scanner_sees_a_table():
    """The checks above would fail on a table: a literal of two op names, and not on one name alone."""
    tree = ast.parse('T = {"aten::add": 1, "aten::sub.Tensor": 2}\nU = ("aten::add", "x")\n')
    assert [len(_op_names(n)) for n in ast.walk(tree) if _op_names(n)] == [2, 1]
    tree = ast.parse('V = {"isnan": 1, "eq": 2, **W, "allreduce_": 3}\nK = {"all_gather": 1, "all_reduce": 2, '
                     '"broadcast": 3}\nP = ("all", "any")\n')
    assert [_bare_op_names(n) for n in ast.walk(tree) if _bare_op_names(n)] == [["isnan", "eq", "allreduce_"]]
    assert not _bare_op_names(ast.parse('("isnan", "isinf", "not_an_op")').body[0].value)
    assert CPP_OP_LITERAL.search(_strip_comments('{"aten::add", "Tensor"}, // "aten::sub"'))
    assert not CPP_OP_LITERAL.search(_strip_comments('int x;  // {"aten::sub", "Tensor"}'))
