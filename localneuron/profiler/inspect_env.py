"""Profiling without code changes, as the Neuron runtime does it (docs/support-matrix.md#profiling, environment route):

    NEURON_RT_INSPECT_ENABLE=1                    record the whole process
    NEURON_RT_INSPECT_OUTPUT_DIR=DIR              where the profile directory goes (default ./output)
    NEURON_RT_INSPECT_SYSTEM_PROFILE=0|1          the runtime layer, system_profile.json (default 1)
    NEURON_RT_INSPECT_DEVICE_PROFILE=0|1|model|session
                                                  device profiles: 1/model keeps the first run of each
                                                  executable after the warm-up, session every run (default 1)
    NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP=N runs of each executable left out first (default 0)

The files are written at exit, into the output directory checked and opened at start: a bad variable or
an output directory that cannot be used (a file, read-only, another user's) is reported before the run, and
the run goes on without the profile. torch.profiler refuses to record the device meanwhile (the
documentation says not to combine the two).
"""
import atexit
import warnings

from localneuron import _C
from localneuron.profiler import capture_config, kineto_bridge, profile_files
from localneuron.runtime.checked_files import OutputDirectory, OutputError
from localneuron.runtime.environment import ConfigurationError, read

ENABLE = "NEURON_RT_INSPECT_ENABLE"
OUTPUT_DIR = "NEURON_RT_INSPECT_OUTPUT_DIR"
SYSTEM_PROFILE = "NEURON_RT_INSPECT_SYSTEM_PROFILE"
DEVICE_PROFILE = "NEURON_RT_INSPECT_DEVICE_PROFILE"
NUM_WARMUP = "NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP"



def _settings():
    return (read(OUTPUT_DIR), read(SYSTEM_PROFILE), read(DEVICE_PROFILE), read(NUM_WARMUP))


start_error: Exception | None = None  # why the route could not start (`localneuron run` refuses to run then)


def start_from_environment() -> None:
    """Starts recording when NEURON_RT_INSPECT_ENABLE asks for it. A bad variable raises ConfigurationError,
    an unusable output directory OutputError, both before anything is recorded."""
    global start_error
    try:
        if not read(ENABLE):
            return
        output_dir, system, device, warmup = _settings()
        directory = OutputDirectory(output_dir, what=f"the profile ({OUTPUT_DIR})")
    except (ConfigurationError, OutputError) as error:
        start_error = error
        raise
    start_ns = _C.trace_clock_ns()
    _C.start_inspect()
    atexit.register(_finish, directory, (system, device, warmup), start_ns)


def _kept_device_spans(spans, mode: str, warmup: int) -> list:
    runs: dict = {}
    kept = []
    for s in sorted(spans, key=lambda s: s.start_ns):
        key = (s.core, s.details.get("executable", s.name))
        runs[key] = runs.get(key, 0) + 1
        if runs[key] > warmup and (mode == "session" or runs[key] == warmup + 1):
            kept.append(s)
    return kept


def _finish(directory: OutputDirectory, settings, start_ns: int) -> None:
    system, device, warmup = settings
    rows = _C.stop_inspect()
    modes = tuple(m for m, on in (("RUNTIME", system), ("DEVICE", device is not None)) if on) + ("HOST_MEMORY",)
    config = capture_config.CaptureConfig(modes=modes, output_dir=directory.path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the warm-up hint is for torch.profiler traces
        kineto_bridge.build(rows, start_ns, _C.trace_clock_ns(), capture_config.render(config))
    trace = kineto_bridge.last_trace
    if device is not None:
        trace = trace._replace(spans=_kept_device_spans(trace.spans, device, warmup))
    path = profile_files.write(directory, trace)
    print(f"[Neuron] profile written to {path}", flush=True)
