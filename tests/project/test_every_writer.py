"""Every file the package writes goes through localneuron/runtime/checked_files.py (paths walked whole from /,
never through another user's symlink or directory, special files never replaced, writes atomic). This test reads
the source of every module (ast) for the calls that write a file and fails for any outside checked_files.py that
the table below does not name with the reason that write is safe.

What counts as writing a file: open() or Path.open() with a w, a, x or + mode; os.open with a write or create flag
(or flags it cannot read); Path.write_text/write_bytes; shutil's copy and move functions; tempfile's file makers
(NamedTemporaryFile, TemporaryFile, SpooledTemporaryFile, mkstemp); json.dump and pickle.dump (to a file); torch.save
and numpy's save functions (to a path or a file). Calls into checked_files itself are the sanctioned route.
tempfile's directory makers (mkdtemp, TemporaryDirectory) are not writes: they create a new 0700 directory
exclusively, and what is then written inside one is found on its own."""
import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGES = ("localneuron", "torch_neuronx", "nki", "neuronxcc")
THE_CHECKED_MODULE = "localneuron/runtime/checked_files.py"

# "path::function" -> why that write is safe without checked_files. Keep it short: each entry is a promise.
ALLOWED_WRITERS = {
    "localneuron/estimate/script.py::worker": "the worker's result file in the estimate's own 0700 temporary "
                                              "directory (tempfile.TemporaryDirectory in estimate())",
    "localneuron/estimate/script.py::target": "estimate --script's dry run: the copy of a file the script appends to, "
                                              "made inside the run's private 0700 directory (PrivateWrites.root)",
    "localneuron/runtime/process_dirs.py::process_directory": "the empty lock file, created (O_EXCL, O_NOFOLLOW) in "
                                                              "the 0700 directory mkdtemp made for this process",
}

WRITE_MODE_LETTERS = set("wax+")
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
READ_ONLY_FLAGS = {"O_RDONLY", "O_DIRECTORY", "O_NOFOLLOW", "O_NONBLOCK", "O_CLOEXEC", "O_NOCTTY", "O_PATH",
                   "DIRECTORY", "NOFOLLOW", "NONBLOCK", "CLOEXEC"}  # the last four: checked_files' names for them
WRITING_FUNCTIONS = {
    "shutil.copy", "shutil.copy2", "shutil.copyfile", "shutil.copytree", "shutil.move",
    "tempfile.NamedTemporaryFile", "tempfile.TemporaryFile", "tempfile.SpooledTemporaryFile", "tempfile.mkstemp",
    "json.dump", "pickle.dump", "torch.save", "numpy.save", "numpy.savez", "numpy.savez_compressed", "numpy.savetxt",
}
WRITING_METHODS = {"write_text", "write_bytes"}


def _imported_names(tree: ast.AST) -> dict:
    """local name -> what it names: np -> numpy (import numpy as np), copy -> shutil.copy (from shutil import copy)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]  # `import os.path` binds os
                names[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(func: ast.AST, names: dict) -> str | None:
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if not isinstance(func, ast.Name):
        return None
    return ".".join([names.get(func.id, func.id), *reversed(parts)])


def _argument(call: ast.Call, position: int, keyword: str) -> ast.AST | None:
    if len(call.args) > position:
        return call.args[position]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _writes_by_mode(mode: ast.AST | None) -> bool:
    if mode is None:
        return False  # open()'s default, "r"
    if isinstance(mode, ast.Constant) and isinstance(mode.value, str):
        return bool(WRITE_MODE_LETTERS & set(mode.value))
    return True  # a mode it cannot read: counted, so it is looked at


def _writes_by_flags(flags: ast.AST | None) -> bool:
    nodes = list(ast.walk(flags or ast.Constant(0)))
    modules = {id(n.value) for n in nodes if isinstance(n, ast.Attribute)}  # os in os.O_RDONLY
    names = {n.attr for n in nodes if isinstance(n, ast.Attribute)}
    names |= {n.id for n in nodes if isinstance(n, ast.Name) and id(n) not in modules}
    return bool(names & WRITE_FLAGS) or not names <= READ_ONLY_FLAGS


def writes_a_file(call: ast.Call, names: dict) -> bool:
    dotted = _dotted(call.func, names)
    if dotted in ("open", "io.open", "builtins.open"):
        return _writes_by_mode(_argument(call, 1, "mode"))
    if dotted == "os.open":
        return _writes_by_flags(_argument(call, 1, "flags"))
    if dotted in WRITING_FUNCTIONS:
        return True
    if isinstance(call.func, ast.Attribute):
        if call.func.attr in WRITING_METHODS:
            return True
        if call.func.attr == "open":  # Path.open(mode): its mode comes first (other .open()s: counted, looked at)
            return _writes_by_mode(_argument(call, 0, "mode"))
    return False


def writers(source: str) -> list[tuple[int, str]]:
    """(line, enclosing function or "<module>") of every call in source that writes a file."""
    tree = ast.parse(source)
    names = _imported_names(tree)
    found = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Call) and writes_a_file(child, names):
                found.append((child.lineno, function))
            inner = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            visit(child, inner)

    visit(tree, "<module>")
    return found


@pytest.mark.parametrize("snippet", [
    "open(p, 'w')",
    "open(p, mode='ab')",
    "open(p, 'r+')",
    "import io\nio.open(p, 'x')",
    "from pathlib import Path\nPath(p).open('w')",
    "with path.open(mode='a') as f: pass",
    "import os\nos.open(p, os.O_WRONLY | os.O_CREAT)",
    "import os\nos.open(p, flags)",
    "from os import O_RDWR, open as os_open\nos_open(p, O_RDWR)",
    "path.write_text('x')",
    "Path(p).write_bytes(b'x')",
    "import shutil\nshutil.copy(a, b)",
    "from shutil import move\nmove(a, b)",
    "import tempfile\ntempfile.NamedTemporaryFile()",
    "from tempfile import mkstemp\nmkstemp()",
    "import json\njson.dump(data, f)",
    "import pickle\npickle.dump(data, f)",
    "import torch\ntorch.save(m, 'model.pt')",
    "import numpy as np\nnp.save('a.npy', a)",
    "def f(mode):\n    open(p, mode)",
])
def test_the_scan_sees_every_form_of_writing_a_file(snippet):
    assert writers(snippet), snippet


@pytest.mark.parametrize("snippet", [
    "open(p)",
    "open(p, 'rb')",
    "from pathlib import Path\nPath(p).open()",
    "import os\nos.open(p, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)",
    "import os\nos.open(p, os.O_RDONLY | checked_files.NONBLOCK | checked_files.CLOEXEC)",
    "import json\njson.dumps(data)",
    "import tempfile\ntempfile.mkdtemp()",
    "sys.stderr.write('x')",
])
def test_the_scan_leaves_reads_alone(snippet):
    assert not writers(snippet), snippet


SOURCES = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))


def test_every_file_the_package_writes_goes_through_checked_files():
    found = []
    seen_allowed = set()
    for path in SOURCES:
        name = str(path.relative_to(ROOT))
        if name == THE_CHECKED_MODULE:
            continue
        for line, function in writers(path.read_text()):
            if f"{name}::{function}" in ALLOWED_WRITERS:
                seen_allowed.add(f"{name}::{function}")
            else:
                found.append(f"{name}:{line} (in {function})")
    assert not found, ("these write files around localneuron/runtime/checked_files.py: " + ", ".join(found)
                       + "; write with OutputDirectory, OutputFile, write_output (or, if the write "
                       "is safe without them, add it to ALLOWED_WRITERS with the reason)")
    assert seen_allowed == set(ALLOWED_WRITERS), ("ALLOWED_WRITERS names writes that are gone; remove them: "
                                                  + ", ".join(sorted(set(ALLOWED_WRITERS) - seen_allowed)))
