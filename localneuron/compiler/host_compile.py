"""Compiles one ATen graph over neuron tensors into a host executable, through the compile cache.

The cache key covers everything that changes the generated code: the graph as compiled (its code),
the input sizes, strides and dtypes, its constants, forward/backward, the simulated target, the
compile options, the code generator's configuration, the host the code is generated for (CPU
architecture, features and ATen's vector capability, Python ABI) and the versions of torch,
localneuron and this entry format.
"""
import functools
import hashlib
import platform
import sys
import time
from dataclasses import dataclass

import torch
from torch._inductor import config as inductor_config
from torch._inductor.utils import get_donated_idxs

from localneuron.compiler import artifacts, device_time, host_graph, inductor, launch, pending_collectives
from localneuron.compiler.cache import CompileCache, key_of
from localneuron.compiler.settings import CompileSettings
from localneuron.costmodel.work import DeviceWork
from localneuron.runtime import counters
from localneuron.runtime.config import selected_target
from localneuron.runtime.version import VERSION

FORMAT_VERSION = 3  # bump whenever the payload inductor.dump() writes changes
HIT, MISS, DISABLED = "hit", "miss", "disabled"

_caches: dict = {}


@dataclass
class HostExecutable:
    run: object            # boxed callable over device tensors
    cache: str             # hit | miss | disabled
    compile_time_s: float
    work: DeviceWork       # what one launch costs on the target: the profiler's span, the line time, the report
    compiled: object = None  # the code generator's CompiledFxGraph (Adaptive Eager reads its kernels)
    key: str = ""          # the persistent cache's key for it (computed with the cache disabled too)


def _cache_for(settings: CompileSettings) -> CompileCache | None:
    if not settings.cache.enabled:
        return None
    cache = _caches.get(settings.cache)
    if cache is None:
        cache = _caches[settings.cache] = CompileCache(settings.cache)
    return cache


def _constants_digest(gm: torch.fx.GraphModule) -> str:
    h = hashlib.sha256()
    for node in gm.graph.nodes:
        if node.op == "get_attr":
            value = getattr(gm, node.target)
            if isinstance(value, torch.Tensor):
                h.update(node.target.encode())
                h.update(value.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _device_index(example_inputs) -> int:
    for t in example_inputs:
        if isinstance(t, torch.Tensor) and t.device.type == "neuron" and t.device.index is not None:
            return t.device.index
    return torch.neuron.current_device()


@functools.cache
def host_isa() -> tuple:
    """What the generated machine code depends on: a library built for one CPU may not run on another."""
    flags = []
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            flags = next((line.split(":", 1)[1].split() for line in cpuinfo
                          if line.startswith(("flags", "Features"))), [])
    except OSError:  # not Linux: the architecture and ATen's capability below still tell CPUs apart
        pass
    return (platform.machine(), torch.backends.cpu.get_cpu_capability(), sys.implementation.cache_tag,
            hashlib.sha256(" ".join(sorted(flags)).encode()).hexdigest())


def _inductor_config_digest() -> str:
    return hashlib.sha256(repr(sorted(inductor_config.save_config_portable().items())).encode()).hexdigest()


def cache_key(gm, host_inputs, is_backward: bool, settings: CompileSettings) -> str:
    inputs = [(tuple(t.shape), tuple(t.stride()), t.dtype) if isinstance(t, torch.Tensor) else repr(t)
              for t in host_inputs]
    target = selected_target()  # a graph is compiled for one LNC, as neuronx-cc's -lnc is the runtime's
    return key_of(FORMAT_VERSION, torch.__version__, VERSION, target.name, target.lnc, host_isa(),
                  _inductor_config_digest(), settings.model_name, is_backward, gm.code, inputs, _constants_digest(gm),
                  _rounding_marks(gm), _donated_inputs())


def _donated_inputs():
    """The backward inputs Inductor may overwrite in place (AOTAutograd's donated buffers: none under backend.py, but
    entries stored by a build that donated them hold other code for the same graph)."""
    return get_donated_idxs()


def _rounding_marks(gm) -> list:
    """The nodes tracing marked for rounding to their 16-bit float type (emulate_precision_casts): the marks
    change the generated code, and gm.code does not show them."""
    return [n.name for n in gm.graph.nodes if n.meta.get("low_precision_pointwise_barrier")]


@inductor.random_ops_as_eager()  # the cache key's Inductor configuration includes it
def compile_host(gm: torch.fx.GraphModule, example_inputs, is_backward: bool,
                 settings: CompileSettings) -> HostExecutable:
    start = time.perf_counter()
    work = device_time.graph_work(gm, f"{settings.model_name}_{'backward' if is_backward else 'forward'}")
    on_device = host_graph.output_on_device(gm)
    waited = pending_collectives.waited_inputs(gm)
    gm = host_graph.rewrite_devices(gm)
    host_inputs = host_graph.host_inputs(example_inputs)
    cache = _cache_for(settings)
    key = cache_key(gm, host_inputs, is_backward, settings)
    if cache is None:
        deadline = time.monotonic() + settings.cache.lock_timeout_s
        compiled = inductor.compile_graph(gm, host_inputs, is_backward, None, deadline)
        blob, status = None, DISABLED
    else:
        compiled, blob, status = _through_cache(cache, key, gm, host_inputs, is_backward)
    if settings.preserve_artifacts:
        artifacts.preserve(settings.debug_dir, settings.model_name, gm.print_readable(print_output=False),
                           compiled.source_code, blob if blob is not None else inductor.dump(compiled))
    seconds = time.perf_counter() - start
    counters.graph_piece(None if status == DISABLED else status == HIT, int(seconds * 1e9))
    return HostExecutable(run=launch.launcher(compiled, on_device, waited, _device_index(example_inputs), work),
                          cache=status, compile_time_s=seconds, work=work, compiled=compiled, key=key)


def _through_cache(cache: CompileCache, key: str, gm, host_inputs, is_backward: bool):
    loaded = _load(cache, key, host_inputs, is_backward)
    if loaded is not None:
        return loaded
    deadline = time.monotonic() + cache.settings.lock_timeout_s  # one wait budget for every lock below
    with cache.lock(key, deadline):
        loaded = _load(cache, key, host_inputs, is_backward)  # another process may have built it meanwhile
        if loaded is not None:
            return loaded
        compiled = inductor.compile_graph(gm, host_inputs, is_backward, cache.kernel_home(), deadline)
        blob = inductor.dump(compiled)
        cache.store(key, blob)
        return compiled, blob, MISS


def _load(cache: CompileCache, key: str, host_inputs, is_backward: bool):
    blob = cache.load(key)  # authenticated: written with this user's (or the shared) cache key
    if blob is None:
        return None
    try:
        return inductor.load(blob, host_inputs, is_backward), blob, HIT
    except Exception as error:  # an intact entry that still cannot be loaded is as unusable as a corrupt one
        cache.discard(key, f"cannot be loaded: {type(error).__name__}: {error}")
        return None
