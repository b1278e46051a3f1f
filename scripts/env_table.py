"""Prints the README's environment-variable table from the one table localneuron reads them with
(localneuron/runtime/environment.py): `python scripts/env_table.py`."""
from localneuron.runtime.environment import markdown_table

if __name__ == "__main__":
    print(markdown_table(), end="")
