"""Compiles one ATen graph over neuron tensors into a host executable, through the compile cache.

The cache key covers everything that changes the generated code: the graph as compiled, the input
sizes, strides and dtypes, its constants, forward/backward, the simulated target, the compile
options and the versions of torch, localneuron and this entry format.
"""
import hashlib
import time
from dataclasses import dataclass

import torch

import localneuron
from localneuron.compiler import artifacts, host_graph, inductor, launch
from localneuron.compiler.cache import CompileCache, key_of
from localneuron.compiler.settings import CompileSettings
from localneuron.runtime.config import selected_target

FORMAT_VERSION = 2  # bump whenever the payload inductor.dump() writes changes
HIT, MISS, DISABLED = "hit", "miss", "disabled"

_caches: dict = {}


@dataclass
class HostExecutable:
    run: object            # boxed callable over device tensors
    cache: str             # hit | miss | disabled
    compile_time_s: float


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


def cache_key(gm, host_inputs, is_backward: bool, settings: CompileSettings) -> str:
    inputs = [(tuple(t.shape), tuple(t.stride()), t.dtype) if isinstance(t, torch.Tensor) else repr(t)
              for t in host_inputs]
    return key_of(FORMAT_VERSION, torch.__version__, localneuron.__version__, selected_target().name,
                  settings.model_name, is_backward, gm.code, inputs, _constants_digest(gm))


def compile_host(gm: torch.fx.GraphModule, example_inputs, is_backward: bool,
                 settings: CompileSettings) -> HostExecutable:
    start = time.perf_counter()
    on_device = host_graph.output_on_device(gm)
    gm = host_graph.rewrite_devices(gm)
    host_inputs = host_graph.host_inputs(example_inputs)
    cache = _cache_for(settings)
    with inductor.inductor_home(inductor.kernel_dir(cache and settings.cache.directory)):
        if cache is None:
            compiled, status = inductor.compile_graph(gm, host_inputs, is_backward), DISABLED
            blob = None
        else:
            key = cache_key(gm, host_inputs, is_backward, settings)
            compiled, blob, status = _through_cache(cache, key, gm, host_inputs, is_backward)
        if settings.preserve_artifacts:
            artifacts.preserve(settings.debug_dir, settings.model_name, gm.print_readable(print_output=False),
                               compiled.source_code, blob if blob is not None else inductor.dump(compiled))
    return HostExecutable(run=launch.launcher(compiled, on_device, _device_index(example_inputs)),
                          cache=status, compile_time_s=time.perf_counter() - start)


def _through_cache(cache: CompileCache, key: str, gm, host_inputs, is_backward: bool):
    loaded = _load(cache, key, host_inputs, is_backward)
    if loaded is not None:
        return loaded
    with cache.lock(key):
        loaded = _load(cache, key, host_inputs, is_backward)  # another process may have built it meanwhile
        if loaded is not None:
            return loaded
        compiled = inductor.compile_graph(gm, host_inputs, is_backward)
        blob = inductor.dump(compiled)
        cache.store(key, blob)
        return compiled, blob, MISS


def _load(cache: CompileCache, key: str, host_inputs, is_backward: bool):
    blob = cache.load(key)
    if blob is None:
        return None
    try:
        return inductor.load(blob, host_inputs, is_backward), blob, HIT
    except Exception as error:  # an intact entry that still cannot be loaded is as unusable as a corrupt one
        cache.discard(cache.path(key), f"cannot be loaded: {type(error).__name__}: {error}")
        return None
