"""Which NKI names AWS's NKI Library uses, how often, and whether localneuron's `nki` has them.

    python scripts/nki_library_census.py [LIBRARY_ROOT] [--missing] [--json]

LIBRARY_ROOT defaults to shared/third_party/nki-library beside the project (localneuron.nki.library_tree;
users with network fetch commit d2ad3a5 with the command that module gives).
Every `.py` file under src/ and test/ is parsed (never imported); a use is an attribute read on a
name bound by `import nki...` or a name imported with `from nki... import`. A name counts as
present when importing its module from localneuron's `nki` and reading the attribute works.
Exit status 1 when a name is missing, so the claim "the library's NKI surface exists" is checkable.
"""
import argparse
import ast
import importlib
import json
import sys
from collections import Counter
from pathlib import Path

from localneuron.nki import library_tree

# Modules of the NKI namespace; a dotted use is attributed to the deepest module it starts with.
MODULES = ("nki", "nki.language", "nki.isa", "nki.isa.constants", "nki.collectives", "nki.typing",
           "nki.dtype", "nki.compiler", "nki.tensor", "nki.language.dtypes")


def _dotted(node):
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return list(reversed(parts))
    return None


def _mark_parents(tree):
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            child._parent_attr = node


def census(root):
    counts = Counter()
    for path in sorted(list((root / "src").rglob("*.py")) + list((root / "test").rglob("*.py"))):
        try:
            source = path.read_text(encoding="utf-8")
            tree = ast.parse(source)
        except (SyntaxError, UnicodeDecodeError):
            continue
        _mark_parents(tree)
        counts.update(_uses_in_tree(tree))
    return counts


def _uses_in_tree(tree):
    """NKI names one parsed file uses. Parent links are set first, so a chain such as
    nisa.engine.vector counts once (as nki.isa.engine), not once per prefix."""
    aliases, counts = {}, Counter()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for name in node.names:
                if name.name == "nki" or name.name.startswith("nki."):
                    aliases[name.asname or "nki"] = name.name if name.asname else "nki"
        elif isinstance(node, ast.ImportFrom) and node.module and (
                node.module == "nki" or node.module.startswith("nki.")):
            for name in node.names:
                full = f"{node.module}.{name.name}"
                if full in MODULES:
                    aliases[name.asname or name.name] = full
                else:
                    counts[full] += 1
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute) or isinstance(getattr(node, "_parent_attr", None), ast.Attribute):
            continue
        chain = _dotted(node)
        if not chain or chain[0] not in aliases:
            continue
        path = [aliases[chain[0]]] + chain[1:]
        parts = ".".join(path).split(".")   # an alias may stand for a dotted module
        for cut in range(len(parts) - 1, 0, -1):
            if ".".join(parts[:cut]) in MODULES:
                counts[".".join(parts[:cut + 1])] += 1
                break
    return counts


def present(full_name):
    module, _, attribute = full_name.rpartition(".")
    try:
        return hasattr(importlib.import_module(module), attribute)
    except ImportError:
        return False


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=None)
    parser.add_argument("--missing", action="store_true", help="list only the names localneuron lacks")
    parser.add_argument("--json", action="store_true", help="print the table as JSON")
    args = parser.parse_args(argv)
    try:
        root = library_tree.find(args.root)
    except FileNotFoundError as error:
        sys.exit(str(error))
    if root is None:
        sys.exit(f"no NKI Library tree found; name one, or fetch it with: {library_tree.FETCH_COMMAND}")
    counts = census(root)
    rows = [{"name": name, "uses": uses, "present": present(name)} for name, uses in counts.most_common()]
    missing = [r for r in rows if not r["present"]]
    if args.json:
        print(json.dumps(rows, indent=1))
    else:
        for row in (missing if args.missing else rows):
            print(f"{row['name']:<48} {row['uses']:>6}  {'ok' if row['present'] else 'MISSING'}")
        total = sum(counts.values())
        print(f"\n{len(rows)} NKI names, {total} uses; missing {len(missing)} names "
              f"({sum(r['uses'] for r in missing)} uses)")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
