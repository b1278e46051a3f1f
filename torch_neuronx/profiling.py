"""torch_neuronx.profiling: TorchNeuron's profiler configuration for torch.profiler (docs/support-matrix.md#profiling).

    from torch_neuronx.profiling import NeuronConfig, ProfileMode, NeuronProfiler
    cfg = NeuronConfig(modes=[ProfileMode.DEVICE, ProfileMode.RUNTIME], profile_output_dir="./profile")
    with torch.profiler.profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
                                experimental_config=cfg, on_trace_ready=NeuronProfiler(cfg).export_trace):
        ...

The profile directory has TorchNeuron's layout with open formats in place of the proprietary ones
(localneuron/profiler/profile_files.py); device times are estimates of the simulated target.
"""
import enum
import time

import torch

from localneuron.profiler import capture_config, kineto_bridge, profile_files
from localneuron.runtime.checked_files import OutputDirectory


class ProfileMode(enum.Enum):
    DEVICE = "DEVICE"            # device timeline per NeuronCore engine
    RUNTIME = "RUNTIME"          # runtime events: compiles, launches, copies, collectives
    CPU_UTIL = "CPU_UTIL"        # host CPU utilisation
    HOST_MEMORY = "HOST_MEMORY"  # host and device memory


DEFAULT_OUTPUT_DIR = "./output"


class NeuronConfig(torch._C._profiler._ExperimentalConfig):
    """torch.profiler's experimental_config for the neuron device; Kineto hands its settings to the
    device's activity profiler as the custom profiler config string."""

    def __init__(self, modes=None, max_events_per_nc: int | None = None, capture_enabled_for_nc: str | None = None,
                 profile_output_dir: str | None = None, neff_cache_dir: str | None = None,
                 precache_node_info: bool = True):
        modes = [ProfileMode.DEVICE, ProfileMode.RUNTIME] if modes is None else list(modes)
        bad = [m for m in modes if not isinstance(m, ProfileMode)]
        if bad or not modes:
            raise ValueError(f"NeuronConfig(modes=...) takes a non-empty list of ProfileMode members "
                             f"({', '.join('ProfileMode.' + m.name for m in ProfileMode)}), got {bad or modes}")
        if max_events_per_nc is not None and (not isinstance(max_events_per_nc, int) or max_events_per_nc <= 0):
            raise ValueError(f"NeuronConfig(max_events_per_nc={max_events_per_nc!r}): expected a positive integer")
        self.capture = capture_config.CaptureConfig(
            modes=tuple(m.value for m in modes), max_events_per_nc=max_events_per_nc,
            cores=capture_config.parse_cores(capture_enabled_for_nc) if capture_enabled_for_nc else None,
            output_dir=profile_output_dir or DEFAULT_OUTPUT_DIR, neff_cache_dir=neff_cache_dir)
        self.modes = modes
        self.precache_node_info = bool(precache_node_info)  # executables are compiled on first use either way
        super().__init__(custom_profiler_config=capture_config.render(self.capture))


class NeuronProfiler:
    """on_trace_ready=NeuronProfiler(cfg).export_trace writes the framework trace next to the neuron files.
    The output directory is checked and opened here, before the profiled run (runtime/checked_files.py):
    a directory that cannot be used raises OutputError now, not when the trace is ready."""

    def __init__(self, config: NeuronConfig | None = None):
        self.config = config or NeuronConfig()
        self.output = OutputDirectory(self.config.capture.output_dir, what="the profile (profile_output_dir)")
        self.last_output_dir = None

    def export_trace(self, prof) -> str:
        trace = kineto_bridge.last_trace
        if trace is None:
            raise RuntimeError("NeuronProfiler.export_trace: no neuron device trace was recorded. Profile with "
                               "activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1].")
        trace = trace._replace(config=self.config.capture)
        steps = sorted(round(e.time_range.start * 1000) + prof.profiler.kineto_results.trace_start_ns()
                       for e in prof.events() if e.name.startswith("ProfilerStep"))
        path = profile_files.write(self.output, trace, prof.export_chrome_trace, steps, _cpu_util(prof, trace))
        self.last_output_dir = path
        return self.last_output_dir


def _cpu_util(prof, trace) -> dict:
    """CPU time of the framework ops per host thread over the trace window."""
    window_us = max((trace.end_ns - trace.start_ns) / 1000.0, 1e-9)
    busy: dict = {}
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CPU:
            busy[e.thread] = busy.get(e.thread, 0.0) + e.self_cpu_time_total
    return {"window_us": window_us, "captured_at": time.time(),
            "threads": {str(t): {"busy_us": us, "utilisation": us / window_us} for t, us in busy.items()}}
