"""Runs the `localneuron` command in a child process, and writes the scripts the command tests run."""
import os
import subprocess
import sys
import textwrap


def localneuron(*args, cwd=None, env=None, timeout=300) -> subprocess.CompletedProcess:
    """`localneuron ARGS...` as a user runs it (python -m, so the checkout under test is the one run)."""
    return subprocess.run([sys.executable, "-m", "localneuron.cli.main", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=cwd, env={**os.environ, **(env or {})})


def write(path, code: str):
    path.write_text(textwrap.dedent(code))
    return path


def lines_of(path, *needles) -> dict:
    """needle -> line number of the (only) source line containing it."""
    text = path.read_text().splitlines()
    found = {}
    for needle in needles:
        hits = [i + 1 for i, line in enumerate(text) if needle in line]
        assert len(hits) == 1, (needle, hits)
        found[needle] = hits[0]
    return found
