"""The folder maps are true: each README that maps a folder's files (csrc/README.md, tests/README.md and the
README.md of a package under localneuron/) names every file the folder holds, and names no file that does not
exist. (README.md's repository map and docs/architecture.md's layer table are test_package_layers' to check.)"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BACKTICKED = re.compile(r"`([^`\s]+)`")


def _expand(name: str) -> list[str]:
    """`runtime/alias.{h,cpp}` -> runtime/alias.h, runtime/alias.cpp"""
    braces = re.fullmatch(r"(.*)\{([^}]+)\}(.*)", name)
    if not braces:
        return [name]
    head, choices, tail = braces.groups()
    return [f"{head}{choice}{tail}" for choice in choices.split(",")]


def _named(readme: Path, pattern: str) -> set[str]:
    """The paths matching `pattern` (a regex on the path) that the README names in backticks, relative to its
    folder, also when several share a row (`stats.py`, `report.py`)."""
    named = set()
    for token in BACKTICKED.findall(readme.read_text()):
        for name in _expand(token):
            if re.fullmatch(pattern, name):
                named.add(name)
    return named


def _files(folder: Path, suffixes: tuple) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file() and p.suffix in suffixes
            and "__pycache__" not in p.parts}


def test_csrc_readme_maps_every_source_file():
    folder = ROOT / "csrc"
    named = _named(folder / "README.md", r"[\w/]+\.(h|cpp)")
    present = _files(folder, (".h", ".cpp"))
    assert sorted(present - named) == [], "csrc/README.md does not name these files"
    assert sorted(named - present) == [], "csrc/README.md names files that do not exist"


def test_tests_readme_lists_every_test_file_under_its_folder():
    text = (ROOT / "tests" / "README.md").read_text()
    sections = re.split(r"^## `(\w+)/`", text, flags=re.M)[1:]
    listed = {folder: set(re.findall(r"`(test_\w+\.py)`", body)) for folder, body in zip(sections[::2], sections[1::2])}
    folders = {p.parent.name for p in (ROOT / "tests").glob("*/test_*.py")}
    assert sorted(folders - set(listed)) == [], "tests/README.md has no section for these folders"
    for folder in sorted(folders):
        present = {p.name for p in (ROOT / "tests" / folder).glob("test_*.py")}
        assert sorted(present - listed[folder]) == [], f"tests/README.md's {folder}/ section does not list these"
        assert sorted(listed[folder] - present) == [], f"tests/README.md's {folder}/ section lists missing files"


PACKAGE_READMES = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "localneuron").rglob("README.md"))


@pytest.mark.parametrize("readme", PACKAGE_READMES)
def test_package_readme_maps_its_modules(readme):
    folder = (ROOT / readme).parent
    named = _named(ROOT / readme, r"\w+\.py")
    present = {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}
    assert sorted(present - named) == [], f"{readme} does not name these modules of its folder"
    assert sorted(named - present - {"__init__.py"}) == [], f"{readme} names modules its folder does not hold"
