"""Every citation in the tree can be followed by a reader of this repository: no line of a tracked text file cites
the team's private behavioural notes or other documents outside the tree (issue 32). Cite a page in docs/ or the
public AWS Neuron documentation instead. The NKI library's default location on disk is a path, not a citation."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SUFFIXES = {".py", ".cpp", ".h", ".md", ".sh", ".toml", ".txt", ".cfg", ".yml"}

# Built from pieces so that this file does not contain the patterns it looks for.
_SECTION = "\u00a7"
_SHARED = "shared" + "/"
OUT_OF_TREE = re.compile("|".join([
    r"(?i:contract\s*" + _SECTION + ")",          # the private notes' sections
    r"torchneuron-" + "behaviour",                 # the private notes' file
    r"2\.34-" + "audit",
    r"price-once" + r"\.md",
    r"architecture-" + "review",
    _SHARED + "reference",
    r"\.\./" + _SHARED.rstrip("/"),
    r"(?i:reference\s+notes)",                     # the private hardware notes
    r"(?i:reference\s*" + _SECTION + ")",
    r"nki-hardware-" + "profiler",                 # their file
    r"\(" + _SECTION + r"\s*\d",                   # a bare section number, no document named: theirs
    r"#\s*" + _SECTION + r"\s*\d",
]))
# Where the NKI library's tree lies on disk (localneuron/nki/library_tree.py looks it up there): allowed.
NKI_LIBRARY_PATH = _SHARED + "third_party/nki-library"


def _tracked_text_files() -> list[Path]:
    names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    paths = [ROOT / n for n in names.decode().split("\0") if n]
    return [p for p in paths if p.suffix in SUFFIXES and p.is_file()]


def _out_of_tree_citations() -> list[str]:
    found = []
    for path in _tracked_text_files():
        for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUT_OF_TREE.search(line.replace(NKI_LIBRARY_PATH, "")):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    return found


def test_no_line_cites_a_document_outside_the_tree():
    found = _out_of_tree_citations()
    assert not found, f"{len(found)} lines cite a document outside the tree:\n" + "\n".join(found)


def test_the_scan_sees_what_it_looks_for():
    assert OUT_OF_TREE.search("as the Contract " + _SECTION + "9.5 says")
    assert OUT_OF_TREE.search("see ../" + _SHARED + "notes.md")
    assert OUT_OF_TREE.search("one DMA engine (" + _SECTION + "7.1)")
    assert OUT_OF_TREE.search("chips_per_instance: int        # " + _SECTION + "7.3")
    assert OUT_OF_TREE.search("the published rules (reference " + "notes " + _SECTION + "8)")
    assert not OUT_OF_TREE.search("one DMA engine, theoretical [dma-overview]")
    assert not OUT_OF_TREE.search(("beside the project: " + NKI_LIBRARY_PATH).replace(NKI_LIBRARY_PATH, ""))
    assert ROOT / "README.md" in _tracked_text_files()
