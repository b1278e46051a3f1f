"""Exit status 0 when every requirement in the file named by argv[1] is installed, 1 otherwise (printing what is
missing): scripts/nki_library_tests.sh asks pip only then, which costs seconds at every run. A requirement is a
distribution name, one a line (a version marker after it is pip's to judge, not checked here)."""
import re
import sys
from importlib import metadata


def missing(lines) -> list[str]:
    absent = []
    for line in lines:
        requirement = line.split("#", 1)[0].strip()
        if not requirement:
            continue
        name = re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0]
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            absent.append(requirement)
    return absent


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as requirements:
        absent = missing(requirements)
    if absent:
        print(" ".join(absent))
    sys.exit(1 if absent else 0)
