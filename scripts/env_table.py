"""Prints docs/environment.md, the environment-variable page, from the one table localneuron reads the
variables with (localneuron/runtime/environment.py): `python scripts/env_table.py > docs/environment.md`."""
from localneuron.runtime.environment import markdown_table

HEADER = """# Environment variables

Generated from the one table localneuron reads them with (`localneuron/runtime/environment.py`) by
`python3 scripts/env_table.py > docs/environment.md`; do not edit by hand. A bad value is one error or
warning naming the variable and what it accepts; `localneuron info` shows what is in effect.

"""

if __name__ == "__main__":
    print(HEADER + markdown_table(), end="")
