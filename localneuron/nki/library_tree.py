"""Where AWS's NKI Library tree is (test data for the simulator: its kernels, PyTorch references and
simulation-mode tests run here unchanged; the project never copies its code).

Found at the path a caller names, else as `shared/third_party/nki-library` beside the project or one of
its parent folders (the tree the project's scripts and tests use). Users with network fetch the same tree
with FETCH_COMMAND.
"""
from pathlib import Path

COMMIT = "d2ad3a5"
FETCH_COMMAND = f"git clone https://github.com/aws-neuron/nki-library && git -C nki-library checkout {COMMIT}"
_PROJECT = Path(__file__).resolve().parents[2]


def is_library(path):
    path = Path(path)
    return (path / "src" / "nkilib_src" / "nkilib").is_dir() and (path / "test" / "conftest.py").is_file()


def find(explicit=None):
    """The library root, or None when there is none (an explicit path that is no library tree raises)."""
    if explicit is not None:
        if not is_library(explicit):
            raise FileNotFoundError(f"{explicit} is not an NKI Library tree (no src/nkilib_src/nkilib or "
                                    f"test/conftest.py); fetch one with: {FETCH_COMMAND}")
        return Path(explicit).resolve()
    for folder in [_PROJECT, *_PROJECT.parents]:
        candidate = folder / "shared" / "third_party" / "nki-library"
        if is_library(candidate):
            return candidate
    return None


if __name__ == "__main__":  # scripts/nki_library_tests.sh: the root, found without importing localneuron (or torch)
    import sys

    found = find(sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] else None)
    sys.exit(f"no NKI Library tree found; fetch it with: {FETCH_COMMAND}") if found is None else print(found)
