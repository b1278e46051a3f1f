"""The environment variables: one table parses and validates them all; a bad value is one clear error
naming the variable and what it accepts; `localneuron info` lists them; the README table is its rendering."""
import ast
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
                                                 r"NeuronCores \(0-3; 1 chip\(s\), 4 logical NeuronCores a chip at LNC=2\); raise LOCALNEURON_CHIPS"):
        device_config()
    monkeypatch.setenv("LOCALNEURON_CHIPS", "2")
    assert device_config().visible_cores == (2, 3, 4, 5)


def test_too_many_ranks_per_host_for_the_largest_instance_is_refused(monkeypatch):
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "65")
    with pytest.raises(ConfigurationError, match="LOCAL_WORLD_SIZE=65 ranks on one host need 17 chips"):
        device_config()


PYTHON_SOURCES = [p for folder in ("localneuron", "torch_neuronx", "nki", "scripts") for p in (ROOT / folder).rglob("*.py")]
PYTHON_SOURCES.append(ROOT / "_localneuron_autoload.py")
CPP_SOURCES = [p for p in (ROOT / "csrc").rglob("*") if p.suffix in (".cpp", ".h", ".cc", ".hpp")]

# Files that may touch the process environment directly, and why.
ENVIRONMENT_ACCESS_ALLOWED = {
    "localneuron/runtime/environment.py": "the table itself: every read, the one write (set_if_unset) and the "
                                          "overrides of other libraries' variables go through it",
    "localneuron/estimate/script.py": "estimate --script runs the user's script as one rank of a job, in a process "
                                      "of its own: it sets the launcher's variables (RANK, WORLD_SIZE...) that "
                                      "script reads, as torchrun does",
    "localneuron/nki/library_shim/nki_library_plugin.py": "a pytest plugin inside AWS's NKI Library test run, not "
                                                          "localneuron's runtime: it reads pytest-xdist's worker name",
    "scripts/nki_library_report.py": "passes its environment on to the NKI Library test run it starts, adding the "
                                     "output folder",
}
OS_ENVIRONMENT_NAMES = {"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"}


def environment_accesses(source: str) -> list[int]:
    """Lines where Python code reaches the process environment, in any form: os.environ / os.getenv / putenv
    (also through an alias of os or a name imported from it), posix's, and _Environ."""
    tree = ast.parse(source)
    os_aliases, direct = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            os_aliases.update(a.asname or a.name for a in node.names if a.name in ("os", "posix", "nt"))
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "posix", "nt"):
            direct.update(a.asname or a.name for a in node.names if a.name in OS_ENVIRONMENT_NAMES)
    lines = []
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr in OS_ENVIRONMENT_NAMES
                and isinstance(node.value, ast.Name) and node.value.id in os_aliases):
            lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id in direct:
            lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module in ("os", "posix", "nt") and any(
                a.name in OS_ENVIRONMENT_NAMES for a in node.names):
            lines.append(node.lineno)
    return sorted(set(lines))


CPP_ENVIRONMENT = re.compile(r"\b(getenv|secure_getenv|setenv|unsetenv|putenv|environ|_environ)\b")


def cpp_environment_accesses(source: str) -> list[int]:
    code = re.sub(r"//[^\n]*|/\*.*?\*/", lambda m: re.sub(r"[^\n]", " ", m.group()), source, flags=re.S)
    code = re.sub(r'"(?:\\.|[^"\\])*"', '""', code)  # string literals may mention anything
    return [code.count("\n", 0, m.start()) + 1 for m in CPP_ENVIRONMENT.finditer(code)]


@pytest.mark.parametrize("snippet", [
    "import os\nos.environ.get('NEURON_X')",
    "import os\nx = os.environ['LOCALNEURON_X']",
    "import os\nif 'RANK' in os.environ: pass",
    "import os\nos.getenv('WORLD_SIZE')",
    "import os as o\no.environ.setdefault('A', '1')",
    "from os import environ\nenviron.get('A')",
    "from os import getenv as g\ng('A')",
    "import os\nenv = dict(os.environ)",
    "import os\nos.putenv('A', '1')",
    "def f():\n    import os\n    return {k: v for k, v in os.environ.items()}",
])
def test_the_guard_sees_every_form_of_environment_access(snippet):
    assert environment_accesses(snippet), snippet


@pytest.mark.parametrize("snippet", [
    'const char* v = std::getenv("NEURON_X");',
    'auto v = getenv("X");',
    'extern char** environ;',
    'setenv("A", "1", 1);',
])
def test_the_guard_sees_cpp_environment_access(snippet):
    assert cpp_environment_accesses(snippet), snippet
    assert not cpp_environment_accesses(f"// {snippet}\nconst char* s = \"getenv\";")


def test_no_code_reaches_the_environment_around_the_table():
    found = []
    for path in PYTHON_SOURCES:
        name = str(path.relative_to(ROOT))
        if name not in ENVIRONMENT_ACCESS_ALLOWED:
            found += [f"{name}:{line}" for line in environment_accesses(path.read_text())]
    for path in CPP_SOURCES:
        found += [f"{path.relative_to(ROOT)}:{line}" for line in cpp_environment_accesses(path.read_text())]
    assert not found, ("these read or write the environment around runtime/environment.py's table: " + ", ".join(found)
                       + "; add the variable to VARIABLES and read it with read() (C++ receives values from Python)")


def test_every_default_parses_and_every_variable_is_named_by_the_code():
    names = set()
    for path in PYTHON_SOURCES:
        if path.name != "environment.py":
            names.update(node.value for node in ast.walk(ast.parse(path.read_text()))
                         if isinstance(node, ast.Constant) and isinstance(node.value, str))
    for variable in environment.VARIABLES:
        if variable.default is not None:
            variable.parse(variable.default)
        # PyTorch reads TORCH_DEVICE_BACKEND_AUTOLOAD itself (it decides whether localneuron loads at all)
        assert variable.name in names or variable.name == "TORCH_DEVICE_BACKEND_AUTOLOAD", variable.name


BOOLEANS = [v.name for v in environment.VARIABLES if environment.is_boolean(v)]


@pytest.mark.parametrize("name", BOOLEANS)
def test_every_boolean_refuses_a_word_it_does_not_know(monkeypatch, name):
    monkeypatch.setenv(name, "abc")
    with pytest.raises(ConfigurationError, match=rf"{name}='abc' is not valid: expected .*1 or 0 \(also "
                                                 r"true/false, yes/no, on/off\)"):
        environment.read(name)


@pytest.mark.parametrize("name", BOOLEANS)
def test_every_boolean_accepts_every_documented_spelling(monkeypatch, name):
    """NEURON_LAUNCH_BLOCKING once took only 0 and 1 where the other booleans also took true/yes/on."""
    for spelling in (*environment.TRUE_SPELLINGS, *(s.upper() for s in environment.TRUE_SPELLINGS)):
        monkeypatch.setenv(name, spelling)
        assert environment.read(name) not in (False, None), spelling
    for spelling in (*environment.FALSE_SPELLINGS, *(s.capitalize() for s in environment.FALSE_SPELLINGS)):
        monkeypatch.setenv(name, spelling)
        assert environment.read(name) in (False, None), spelling


def accepts(variable, text: str) -> bool:
    try:
        variable.parse(text)
        return True
    except ValueError:
        return False


def test_a_variable_that_takes_0_and_1_only_is_a_boolean_or_says_why_not():
    """A two-valued 0/1 variable is parsed as a boolean, so it takes every documented spelling; the one exception is
    PyTorch's own, which PyTorch reads itself."""
    zero_or_one = {v.name for v in environment.VARIABLES if not environment.is_boolean(v)
                   and accepts(v, "0") and accepts(v, "1") and not accepts(v, "2")}
    assert zero_or_one == {"TORCH_DEVICE_BACKEND_AUTOLOAD"}


def test_the_environment_page_lists_the_boolean_spellings():
    page = (ROOT / "docs" / "environment.md").read_text()
    for true, false in zip(environment.TRUE_SPELLINGS, environment.FALSE_SPELLINGS):
        assert f"`{true}`/`{false}`" in page
    assert "| `NEURON_LAUNCH_BLOCKING` | `0` (boolean) |" in page


def test_a_bad_compile_flag_is_an_error_naming_it(monkeypatch):
    """compiler/settings.py once read its flags leniently: 'abc' was silently false."""
    from localneuron.compiler import settings

    monkeypatch.setenv("TORCH_NEURONX_RETAIN_DEVICE_MODE", "abc")
    with pytest.raises(ConfigurationError, match="TORCH_NEURONX_RETAIN_DEVICE_MODE='abc' is not valid"):
        settings.resolve(None, None)
    monkeypatch.setenv("TORCH_NEURONX_RETAIN_DEVICE_MODE", "yes")
    assert settings.resolve(None, None).retain_device


def test_the_documented_table_is_the_one_the_code_reads():
    """docs/environment.md is generated by scripts/env_table.py from VARIABLES; a variable added without
    regenerating it (`python scripts/env_table.py --write`) fails here."""
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "env_table.py")], capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert (ROOT / "docs" / "environment.md").read_text() == r.stdout
    assert environment.markdown_table() in r.stdout
    rows = [line for line in environment.markdown_table().splitlines()[2:] if line.startswith("|")]
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
