"""The versions the project pins are the versions installed and tested: the `hf` extra in pyproject.toml and
scripts/constraints.txt against the installed distributions; the core package needs only torch and numpy."""
import re
import tomllib
from importlib import metadata
from pathlib import Path

import pytest

from hf_support import HF_EXTRA, require

require(*HF_EXTRA)

ROOT = Path(__file__).resolve().parents[2]
PIN = re.compile(r"^([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+-]+)$")


def project():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]


def pins(requirements) -> dict[str, str]:
    parsed = {}
    for requirement in requirements:
        match = PIN.match(requirement.strip())
        assert match, f"{requirement!r} is not pinned as name==version"
        parsed[match.group(1)] = match.group(2)
    return parsed


def public_version(version: str) -> str:
    return version.split("+")[0]  # torch 2.13.0+cpu is torch 2.13.0 built for the CPU


def test_hf_extra_pins_exactly_what_is_installed():
    pinned = pins(project()["optional-dependencies"]["hf"])
    assert set(HF_EXTRA) <= set(pinned), "every library the hf tests require is pinned by the extra"
    installed = {name: metadata.version(name) for name in pinned}
    assert installed == pinned, ("the installed Hugging Face libraries are not the tested ones; reinstall with "
                                 "`pip install -c scripts/constraints.txt -e .[hf]`")


def test_hf_extra_leaves_out_the_media_libraries_that_do_not_load_with_cpu_torch():
    names = set(pins(project()["optional-dependencies"]["hf"]))
    assert not names & {"torchvision", "torchaudio", "torchcodec"}


def test_constraints_match_what_is_installed():
    lines = [line.split("#")[0].strip() for line in (ROOT / "scripts" / "constraints.txt").read_text().splitlines()]
    constraints = pins(line for line in lines if line)
    assert "torch" in constraints, "the constraints must keep pip from replacing the CPU torch"
    for name, version in constraints.items():
        assert public_version(metadata.version(name)) == version, name


@pytest.mark.parametrize("requirement", project()["dependencies"])
def test_core_package_depends_on_torch_and_numpy_only(requirement):
    assert re.match(r"^(torch|numpy)\b", requirement), requirement
