"""One record per op: what the device decides about an ATen op is written once, in its record
(localneuron/ops/op_records.py), and every other module derives its sets from the records. So no module
outside the record keys a table by op name: no Python dict, set, list or tuple literal there holds two or
more ATen op names ("aten::add", "prims::convert_element_type"), and no C++ source initializes a table of
them (the C++ core receives its ops from the records at registration, e.g. the unboxed fast ops).

Not op tables, so not checked: compiler/partition.py's EAGER_NAMESPACES (keyed by op namespace,
"localneuron_nki": every op of a library) and EAGER_HIGHER_ORDER_OPS (keyed by higher-order operator,
"flex_attention"). Neither key is an ATen op: a namespace has no schema or overload, and a higher-order
operator is a Python object the dispatcher's op table does not hold, so neither fits a record keyed
"aten::name", and only the compiler's partitioner reads them."""
import ast
import re

from import_graph import ROOT

RECORDS = "localneuron/ops/op_records.py"
OP_NAME = re.compile(r"^(aten|prims)::[A-Za-z0-9_]+(\.[A-Za-z0-9_]+)?$")

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


def python_op_tables() -> list[str]:
    found = []
    for path in _python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = _op_names(node)
            if len(names) >= 2:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {type(node).__name__.lower()} of "
                             f"{len(names)} op names ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''})")
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
    assert CPP_OP_LITERAL.search(_strip_comments('{"aten::add", "Tensor"}, // "aten::sub"'))
    assert not CPP_OP_LITERAL.search(_strip_comments('int x;  // {"aten::sub", "Tensor"}'))
