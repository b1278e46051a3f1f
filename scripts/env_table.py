"""Prints docs/environment.md, the page of every environment variable localneuron reads, from the one table
it reads them with (localneuron/runtime/environment.py); `--write` writes the page.

    python scripts/env_table.py --write
"""
import pathlib
import sys

from localneuron.runtime.checked_files import write_output
from localneuron.runtime.environment import markdown_table

PAGE = pathlib.Path(__file__).resolve().parents[1] / "docs" / "environment.md"

HEADER = """# Environment variables

Every variable localneuron reads, with its default and effect. This page is generated from the table the
code reads them with (`localneuron/runtime/environment.py`, `VARIABLES`) by `python scripts/env_table.py
--write`; a test fails when they differ. `localneuron info` shows the value each one has in your
environment.

A bad value is one error naming the variable and the values it accepts (`localneuron run` refuses to start
with one), except for the tuning values marked "warns and keeps the default", which TorchNeuron accepts
the same way. An empty variable counts as unset.

"""


def page() -> str:
    return HEADER + markdown_table()


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        write_output(str(PAGE), page(), "the environment page")
    else:
        print(page(), end="")
