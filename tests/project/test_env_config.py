"""The environment variables: one table parses and validates them all; a bad value is one clear error
naming the variable and what it accepts; `localneuron info` lists them; the README table is its rendering."""
import pathlib
import re
import subprocess
import sys

import pytest

from fresh_python import run_python
from localneuron.runtime import environment
from localneuron.runtime.config import ConfigurationError, device_config

ROOT = pathlib.Path(__file__).resolve().parents[2]

BAD_VALUES = [
    ("LOCALNEURON_HBM_BYTES_PER_CORE", "-5", "byte count from 1 to"),
    ("LOCALNEURON_HBM_BYTES_PER_CORE", "0", "byte count from 1 to"),
    ("LOCALNEURON_HBM_BYTES_PER_CORE", "abc", "byte count from 1 to"),
    ("LOCALNEURON_HBM_BYTES_PER_CORE", "1e30", "byte count from 1 to"),
    ("LOCALNEURON_HBM_BYTES_PER_CORE", "nan", "byte count from 1 to"),
    ("LOCALNEURON_HBM_BYTES_PER_CORE", "inf", "byte count from 1 to"),
    ("LOCALNEURON_HBM_BYTES_PER_CORE", "0.5", "byte count from 1 to"),
    ("LOCALNEURON_HBM_BYTES_PER_CORE", "16 parsecs", "byte count from 1 to"),
    ("LOCALNEURON_CHIPS", "0", "whole number from 1 to 16"),
    ("LOCALNEURON_CHIPS", "-1", "whole number from 1 to 16"),
    ("LOCALNEURON_CHIPS", "two", "whole number from 1 to 16"),
    ("LOCALNEURON_CHIPS", "100", "whole number from 1 to 16"),
    ("NEURON_RT_VISIBLE_CORES", "3-1", "runs backwards"),
    ("NEURON_RT_VISIBLE_CORES", "-1", "core ids like 0, 0,2 or 0-3"),
    ("NEURON_RT_VISIBLE_CORES", "0,,1", "core ids like 0, 0,2 or 0-3"),
    ("NEURON_RT_VISIBLE_CORES", "zero", "core ids like 0, 0,2 or 0-3"),
    ("NEURON_RT_VISIBLE_CORES", "0,0", "named twice"),
    ("LOCALNEURON_TARGET", "trn9", "one of trn2, trn3"),
    ("TORCH_NEURONX_LOG_LEVEL", "loud", "whole number from 0 to 3"),
    ("TORCH_NEURONX_LOG_LEVEL", "7", "whole number from 0 to 3"),
    ("LOCALNEURON_FALLBACK_ERROR", "maybe", "expected 1 or 0"),
    ("NKI_PRECISE_FP", "2", "expected 1 or 0"),
    ("TORCH_DISTRIBUTED_DEBUG", "verbose", "one of OFF, INFO, DETAIL"),
    ("LOCAL_WORLD_SIZE", "0", "whole number from 1 to"),
]


@pytest.mark.parametrize("name,value,accepted", BAD_VALUES)
def test_a_bad_value_is_one_error_naming_the_variable_and_what_it_accepts(monkeypatch, name, value, accepted):
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigurationError) as error:
        environment.read(name)
    message = str(error.value)
    assert message.startswith(f"{name}={value!r} is not valid") and accepted in message, message


@pytest.mark.parametrize("name,value,expected", [
    ("LOCALNEURON_HBM_BYTES_PER_CORE", "1000", 1000),
    ("LOCALNEURON_HBM_BYTES_PER_CORE", "1e9", 10**9),
    ("LOCALNEURON_HBM_BYTES_PER_CORE", "16GiB", 16 * 2**30),
    ("LOCALNEURON_HBM_BYTES_PER_CORE", " 512 MiB ", 512 * 2**20),
    ("NEURON_RT_VISIBLE_CORES", "0-2,5", (0, 1, 2, 5)),
    ("NEURON_RT_VISIBLE_CORES", "3", (3,)),
    ("LOCALNEURON_TARGET", "TRN3", "trn3"),
    ("LOCALNEURON_FALLBACK_ERROR", "on", True),
    ("NKI_PRECISE_FP", "false", False),
    ("TORCH_NEURONX_LOG_LEVEL", "", 1),  # empty is unset: the default
    ("LOCALNEURON_CHIPS", "", None),
])
def test_good_values_parse(monkeypatch, name, value, expected):
    monkeypatch.setenv(name, value)
    assert environment.read(name) == expected


def test_visible_cores_beyond_the_instance_name_the_core_and_the_remedy(monkeypatch):
    monkeypatch.setenv("NEURON_RT_VISIBLE_CORES", "2-5")
    with pytest.raises(ConfigurationError, match=r"NEURON_RT_VISIBLE_CORES='2-5' names core 4, .* 4 logical "
                                                 r"NeuronCores \(0-3\); raise LOCALNEURON_CHIPS"):
        device_config()
    monkeypatch.setenv("LOCALNEURON_CHIPS", "2")
    assert device_config().visible_cores == (2, 3, 4, 5)


def test_too_many_ranks_per_host_for_the_largest_instance_is_refused(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "65")
    with pytest.raises(ConfigurationError, match="LOCAL_WORLD_SIZE=65 ranks on one host need 17 chips"):
        device_config()


def test_every_default_parses_and_every_variable_is_read_by_the_code():
    sources = "\n".join(p.read_text() for folder in ("localneuron", "torch_neuronx", "nki")
                        for p in (ROOT / folder).rglob("*.py") if p.name != "environment.py")
    for variable in environment.VARIABLES:
        if variable.default is not None:
            variable.parse(variable.default)
        read_by_name = re.search(rf"(read|env|env_flag)\(\s*[\"']{variable.name}[\"']", sources)
        read_by_constant = re.search(rf"(\w+)\s*=\s*[\"']{variable.name}[\"']", sources)
        assert read_by_name or read_by_constant or variable.name in {"TORCH_DEVICE_BACKEND_AUTOLOAD"}, variable.name


def test_no_code_reads_the_environment_around_the_table():
    pattern = re.compile(r"(os\.environ\.get|os\.getenv)\(\s*[\"']((LOCALNEURON|TORCH_NEURONX|NEURON|NKI)_\w+)")
    for folder in ("localneuron", "torch_neuronx", "nki"):
        for path in (ROOT / folder).rglob("*.py"):
            found = pattern.search(path.read_text())
            assert found is None, f"{path} reads {found.group(2)} itself; add it to runtime/environment.py"


def test_the_environment_page_is_the_tables_rendering():
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "env_table.py")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    table = environment.markdown_table()
    assert r.stdout.endswith(table)
    page = (ROOT / "docs" / "environment.md").read_text()
    assert page == r.stdout, "docs/environment.md is stale: python3 scripts/env_table.py > docs/environment.md"
    rows = table.splitlines()[2:]
    assert [row.split("`")[1] for row in rows] == [v.name for v in environment.VARIABLES]


def test_import_with_a_bad_variable_warns_once_and_info_and_run_explain(tmp_path):
    env = {"LOCALNEURON_CHIPS": "0"}
    r = run_python("import warnings\nwarnings.simplefilter('always')\nimport torch\n"
                   "print('neuron' if hasattr(torch, 'neuron') else 'no device')", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "no device"
    assert r.stderr.count("LOCALNEURON_CHIPS='0' is not valid: expected a whole number from 1 to 16") == 1, r.stderr
    info = subprocess.run([sys.executable, "-m", "localneuron.cli.main", "info"], capture_output=True, text=True,
                          timeout=120, env={**__import__("os").environ, **env})
    assert info.returncode == 1
    assert re.search(r"LOCALNEURON_CHIPS\s+INVALID: LOCALNEURON_CHIPS='0'", info.stdout), info.stdout
    assert re.search(r"TORCH_NEURONX_LOG_LEVEL\s+unset \(default 1\)", info.stdout)
    script = tmp_path / "job.py"
    script.write_text("print('script ran')\n")
    run = subprocess.run([sys.executable, "-m", "localneuron.cli.main", "run", str(script)], capture_output=True,
                         text=True, timeout=120, env={**__import__("os").environ, **env})
    assert run.returncode == 2 and "LOCALNEURON_CHIPS='0'" in run.stderr and "script ran" not in run.stdout
