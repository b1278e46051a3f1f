"""Builds the neuron part of a torch.profiler trace from the device work noted while it recorded.

csrc/profiler/trace_plugin.cpp calls build(work, start_ns, end_ns, custom_config) when the trace stops (the
config as capture_config.py reads it). This file is the one definition of that contract:

    work:        (kind, id, device, start_ns, compiled_ns, end_ns, bytes, correlation, thread) per piece
                 of work the C++ core did; kind as in WORK_KINDS (csrc/profiler/trace_plugin.h Work), id the
                 executable id or -1, compiled_ns when a cache miss finished compiling (0 on a hit)
    returns      (devices, resources, activities)
    devices:     (device_id, sort_index, name, label): one trace process per NeuronCore
    resources:   (device_id, resource_id, sort_index, name): one track per engine of a core
    activities:  (activity_kind, name, device_id, resource_id, start_ns, end_ns, correlation, metadata,
                  flow_id, flow_start)
                 activity_kind as in ACTIVITY_KINDS; correlation links the activity to the framework op
                 that issued it (0: none); metadata maps names to JSON-encoded values; flow_id > 0 draws
                 an arrow from the runtime activity (flow_start True) to the device activity it caused

Runtime activities sit on the host thread that issued the work, inside its framework op, at the
wall clock's times; device activities sit on the NeuronCore tracks at the simulated device clock's
times, with estimated durations (device_clock.py), issued at the simulated host clock's times
(host_clock.py: the wall clock without the time the host spent doing the device's work).
"""
import gc
import heapq
import json
import os
import warnings
from collections import namedtuple

from localneuron import _C
from localneuron.costmodel.work import TRACKS, price_copy
from localneuron.ops import tracking
from localneuron.profiler import capture_config
from localneuron.profiler.device_clock import DeviceClock, DeviceSpan
from localneuron.profiler.host_clock import HostClock
from localneuron.runtime import trace_events
from localneuron.runtime.config import selected_target

WORK_KINDS = ("executable", "host_to_device", "device_to_host", "device_to_device")
RUNTIME, DEVICE_KERNEL, DEVICE_MEMCPY = 0, 1, 2  # ACTIVITY_KINDS, csrc/profiler/trace_plugin.cpp activity_type()
ACTIVITY_KINDS = {RUNTIME: "PrivateUse1 runtime", DEVICE_KERNEL: "device kernel", DEVICE_MEMCPY: "device copy"}

# trace process ids of the NeuronCores: above any Linux pid, so never a host process's
NEURON_HW_PID_BASE = 1 << 23
# flow ids of runtime -> device arrows: above the ids PyTorch gives its forward -> backward arrows
FLOW_ID_BASE = 1 << 30

Work = namedtuple("Work", "kind id device start_ns compiled_ns end_ns bytes correlation thread")

RUNTIME_NAMES = {
    tracking.NATIVE: "neuron_rt::execute",
    tracking.NATIVE_32BIT: "neuron_rt::execute_64bit_as_32bit",
    tracking.FALLBACK: "neuron_rt::cpu_fallback",
    tracking.VIEW: "neuron_rt::view",
}
COPY_NAMES = {
    "host_to_device": "neuron_rt::copy_host_to_device",
    "device_to_host": "neuron_rt::copy_device_to_host",
    "device_to_device": "neuron_rt::copy_device_to_device",
}
PYTHON_WORK_NAMES = {"graph": "neuron_rt::execute_graph", "collective": "neuron_rt::collective",
                     "nki": "neuron_rt::nki_kernel"}


def hw_pid(core: int) -> int:
    return NEURON_HW_PID_BASE + core


_encode = json.JSONEncoder().encode  # json.dumps without its per-call argument handling (traces hold many)


def _meta(**values) -> dict:
    return {k: _encode(v) for k, v in values.items()}


# what every run of one executable shows in a trace: its details raw, and JSON-encoded for Kineto
_ExecutableMeta = namedtuple("_ExecutableMeta", "runtime device_details device")


# (executable id, route, cache hit/miss) -> _ExecutableMeta: a trace holds thousands of runs of a few
# hundred executables, and encoding their metadata once is most of the building saved
_executable_meta: dict[tuple[int, str, str], _ExecutableMeta] = {}


def _meta_of(executable_id: int, e: tracking.Executable, cache: str) -> _ExecutableMeta:
    key = (executable_id, e.kind, cache)
    known = _executable_meta.get(key)
    if known is None:
        details = dict(op=e.op, signature=e.signature, route=e.kind, executable=executable_id, cache=cache)
        device_details = dict(details, estimated=True)
        known = _executable_meta[key] = _ExecutableMeta(_meta(**details), device_details, _meta(**device_details))
    return known


class _Builder:
    def __init__(self):
        self.pid = os.getpid()
        self.clock = DeviceClock()
        self.host = HostClock()
        self.runtime = []
        self.flows = 0
        self.unseen = []  # heap of (seen_ns, core, end on the device clock) of collectives placed

    def catch_up(self, wall_ns: int) -> None:
        """Collectives the host has seen complete by wall_ns: later work may read their results."""
        while self.unseen and self.unseen[0][0] <= wall_ns:
            _, core, end = heapq.heappop(self.unseen)
            self.clock.result_seen(core, end)

    def runtime_activity(self, activity, thread, start, end, correlation, flow=0, meta=None, **details):
        """meta: the details already encoded (_meta), instead of **details"""
        self.runtime.append((RUNTIME, activity, self.pid, thread, start, end, correlation,
                             _meta(**details) if meta is None else meta, flow, True))

    def flow(self) -> int:
        """A new runtime -> device arrow: the next runtime activity starts it, the next device span ends it."""
        self.flows += 1
        return FLOW_ID_BASE + self.flows

    def executable(self, w: Work) -> None:
        e = tracking.executable(w.id)
        issued = w.compiled_ns or w.start_ns
        meta = _meta_of(w.id, e, "miss" if w.compiled_ns else "hit")
        if w.compiled_ns:
            self.runtime_activity("neuron_rt::compile", w.thread, w.start_ns, w.compiled_ns, w.correlation,
                                  op=e.op, signature=e.signature, route=e.kind,
                                  estimated_device_us=e.estimated_seconds * 1e6)
        on_device = e.kind in (tracking.NATIVE, tracking.NATIVE_32BIT)
        flow = self.flow() if on_device else 0
        self.runtime_activity(RUNTIME_NAMES[e.kind], w.thread, issued, w.end_ns, w.correlation, flow, meta.runtime)
        if on_device:  # a CPU fallback is host work on Trainium too: it stays on the host clock
            self.clock.compute(w.device, e.work, e.op, self.host.simulated(issued), w.correlation,
                               meta.device_details, flow, meta.device)
            self.host.skip(issued, w.end_ns)

    def copy(self, w: Work, kind: str) -> None:
        name = COPY_NAMES[kind]
        flow = self.flow()
        self.runtime_activity(name, w.thread, w.start_ns, w.end_ns, w.correlation, flow, bytes=w.bytes)
        details = dict(bytes=w.bytes, estimated=True)
        work = price_copy(selected_target(), kind, w.bytes)
        issued = self.host.simulated(w.start_ns)
        self.host.skip(w.start_ns, w.end_ns)
        if kind == "host_to_device":
            self.clock.copy_in(w.device, work, name, issued, w.correlation, details, flow)
            return
        done = self.clock.copy_out(w.device, work, name, issued, w.correlation, details, flow)
        if kind == "device_to_host":
            self.host.wait_until(w.end_ns, done)

    def python_work(self, p: trace_events.PythonWork) -> None:
        flow = self.flow()
        self.runtime_activity(PYTHON_WORK_NAMES[p.kind], p.thread, p.start_ns, p.end_ns, p.correlation, flow,
                              name=p.name, **p.details)
        details = dict(p.details, estimated=True)
        issued = self.host.simulated(p.start_ns)
        self.host.skip(p.start_ns, p.end_ns)
        if p.kind == "collective":
            end = self.clock.collective(p.device, p.work, p.name, issued, p.correlation, details, flow)
            if p.seen_ns:
                heapq.heappush(self.unseen, (p.seen_ns, p.device, end))
        else:
            self.clock.compute(p.device, p.work, p.name, issued, p.correlation, details, flow)

    def result(self, config: capture_config.CaptureConfig, spans: list[DeviceSpan]):
        """spans: the device spans the trace captures (captured_spans)"""
        runtime = self.runtime if "RUNTIME" in config.modes else []
        cores = sorted({s.core for s in spans})
        devices = [(hw_pid(c), hw_pid(c), f"neuron_hw NC{c}", f"NeuronCore {c} (estimated device time)")
                   for c in cores]
        resources = [(hw_pid(c), i, i, track) for c in cores for i, track in enumerate(TRACKS)]
        track_id = {track: i for i, track in enumerate(TRACKS)}
        device = [(DEVICE_MEMCPY if s.work.kind == "copy" else DEVICE_KERNEL, s.name, hw_pid(s.core),
                   track_id[s.track], s.start_ns, s.end_ns, s.correlation,
                   _meta(**s.details) if s.meta is None else s.meta, s.flow, False)
                  for s in sorted(spans, key=lambda s: (s.core, s.track, s.start_ns))]
        if {s.flow for s in spans} != {a[8] for a in runtime}:  # an arrow needs both ends
            ends = {s.flow for s in spans}
            runtime = [a if a[8] in ends else (*a[:8], 0, True) for a in runtime]
            starts = {a[8] for a in runtime}
            device = [d if d[8] in starts else (*d[:8], 0, False) for d in device]
        runtime = sorted(runtime, key=lambda a: (a[3], a[4], -a[5]))
        return devices, resources, runtime + device

    def captured_spans(self, config: capture_config.CaptureConfig) -> list[DeviceSpan]:
        kept, per_core = [], {}
        for s in sorted(self.clock.spans, key=lambda s: s.start_ns):
            if config.captures(s.core) and per_core.get(s.core, 0) < (config.max_events_per_nc or float("inf")):
                per_core[s.core] = per_core.get(s.core, 0) + 1
                kept.append(s)
        return kept


# host_clock: the trace's HostClock, to place host events (step starts) on the device clock
LastTrace = namedtuple("LastTrace", "config spans runtime start_ns end_ns host_clock")
last_trace: LastTrace | None = None  # what the latest trace captured, for the profile files (profile_files.py)


def build(work_rows, start_ns: int, end_ns: int, custom_config: str = ""):
    """Building allocates a few objects per event and frees most of them by reference counting; the cyclic
    garbage collector would run many times meanwhile, and a full collection of a training process's heap
    costs more than the building itself (it tripled the profiler's own cost on the example GPT)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _build(work_rows, start_ns, end_ns, custom_config)
    finally:
        if collecting:
            gc.enable()


def _build(work_rows, start_ns: int, end_ns: int, custom_config: str):
    global last_trace
    config = capture_config.parse(custom_config)
    builder = _Builder()
    issued = [(Work(*row), None) for row in work_rows] + [(None, p) for p in trace_events.take()]

    def issue_time(item):
        w, p = item
        return (w.compiled_ns or w.start_ns) if w is not None else p.start_ns

    compiled = sum(1 for w, _ in issued if w is not None and w.compiled_ns)
    if compiled:
        warnings.warn(
            f"{compiled} neuron executables were compiled while this trace recorded (cache misses): their "
            "compilation is in the trace and the first runs are not representative. Warm up (at least 3 "
            "iterations) before profiling, as TorchNeuron recommends.", UserWarning, stacklevel=1)
    for w, p in sorted(issued, key=issue_time):
        builder.catch_up(issue_time((w, p)))
        if p is not None:
            builder.python_work(p)
        elif WORK_KINDS[w.kind] == "executable":
            builder.executable(w)
        else:
            builder.copy(w, WORK_KINDS[w.kind])
    spans = builder.captured_spans(config) if "DEVICE" in config.modes else []
    result = builder.result(config, spans)
    last_trace = LastTrace(config, spans, [a for a in result[2] if a[0] == RUNTIME], start_ns, end_ns, builder.host)
    return result


def install() -> None:
    _C.set_trace_builder(build)
