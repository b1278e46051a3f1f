"""Profiling without code changes, as the Neuron runtime does it (contract §12, environment route):

    NEURON_RT_INSPECT_ENABLE=1                    record the whole process
    NEURON_RT_INSPECT_OUTPUT_DIR=DIR              where the profile directory goes (default ./output)
    NEURON_RT_INSPECT_SYSTEM_PROFILE=0|1          the runtime layer, system_profile.json (default 1)
    NEURON_RT_INSPECT_DEVICE_PROFILE=0|1|model|session
                                                  device profiles: 1/model keeps the first run of each
                                                  executable after the warm-up, session every run (default 1)
    NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP=N runs of each executable left out first (default 0)

The files are written at exit. torch.profiler refuses to record the device meanwhile (the documentation
says not to combine the two).
"""
import atexit
import warnings

from localneuron import _C
from localneuron.profiler import capture_config, kineto_bridge, profile_files
from localneuron.runtime.environment import read

ENABLE = "NEURON_RT_INSPECT_ENABLE"
OUTPUT_DIR = "NEURON_RT_INSPECT_OUTPUT_DIR"
SYSTEM_PROFILE = "NEURON_RT_INSPECT_SYSTEM_PROFILE"
DEVICE_PROFILE = "NEURON_RT_INSPECT_DEVICE_PROFILE"
NUM_WARMUP = "NEURON_RT_INSPECT_DEVICE_PROFILE_NUM_WARMUP"



def _settings():
    return (read(OUTPUT_DIR), read(SYSTEM_PROFILE), read(DEVICE_PROFILE), read(NUM_WARMUP))


def start_from_environment() -> None:
    if not read(ENABLE):
        return
    settings = _settings()  # bad values fail at import, before the run, not at exit
    start_ns = _C.trace_clock_ns()
    _C.start_inspect()
    atexit.register(_finish, settings, start_ns)


def _kept_device_spans(spans, mode: str, warmup: int) -> list:
    runs: dict = {}
    kept = []
    for s in sorted(spans, key=lambda s: s.start_ns):
        key = (s.core, s.details.get("executable", s.name))
        runs[key] = runs.get(key, 0) + 1
        if runs[key] > warmup and (mode == "session" or runs[key] == warmup + 1):
            kept.append(s)
    return kept


def _finish(settings, start_ns: int) -> None:
    output_dir, system, device, warmup = settings
    rows = _C.stop_inspect()
    modes = tuple(m for m, on in (("RUNTIME", system), ("DEVICE", device is not None)) if on) + ("HOST_MEMORY",)
    config = capture_config.CaptureConfig(modes=modes, output_dir=output_dir)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the warm-up hint is for torch.profiler traces
        kineto_bridge.build(rows, start_ns, _C.trace_clock_ns(), capture_config.render(config))
    trace = kineto_bridge.last_trace
    if device is not None:
        trace = trace._replace(spans=_kept_device_spans(trace.spans, device, warmup))
    path = profile_files.write(output_dir, trace)
    print(f"[Neuron] profile written to {path}", flush=True)
