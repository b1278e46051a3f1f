"""The host code generator: Inductor's C++ backend compiles a CPU graph into fused kernels, and a
compiled graph is saved to bytes and loaded back without running the code generator again.

Inductor keeps its generated sources and built kernels (.so) in TORCHINDUCTOR_CACHE_DIR. While the
backend compiles or loads, that variable points at a directory the backend owns (inside the
persistent cache, or a private temporary directory when the cache is off), so kernels are shared
exactly as far as the cache is. Inductor's own FX graph cache is switched off: our cache entries
(cache.py) replace it and carry the kernels with them.
"""
import contextlib
import copy
import os
import pickle
import tempfile

import torch
from torch._inductor import config as inductor_config
from torch._inductor.compile_fx import compile_fx_inner
from torch._inductor.output_code import CompiledFxGraph, CompiledFxGraphConstants
from torch._inductor.runtime.cache_dir_utils import cache_dir
from torch._inductor.utils import BoxedBool

_private_dir = None


def kernel_dir(cache_directory: str | None) -> str:
    global _private_dir
    if cache_directory is not None:
        return os.path.join(cache_directory, "host-kernels")
    if _private_dir is None:
        _private_dir = tempfile.TemporaryDirectory(prefix="localneuron-kernels-")
    return _private_dir.name


@contextlib.contextmanager
def inductor_home(directory: str):
    previous = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = directory
    try:
        with inductor_config.patch(fx_graph_cache=False, autotune_local_cache=False):
            yield
    finally:
        if previous is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = previous


def compile_graph(gm: torch.fx.GraphModule, host_inputs: list, is_backward: bool) -> CompiledFxGraph:
    return compile_fx_inner(gm, host_inputs, is_backward=is_backward)


def _kernel_files(compiled: CompiledFxGraph) -> dict[str, bytes]:
    """The built kernel libraries the graph's wrapper module calls, relative to Inductor's cache dir."""
    call = compiled.current_callable
    module_globals = getattr(call, "__func__", call).__globals__
    root = cache_dir()
    files = {}
    for value in module_globals.values():
        path = getattr(getattr(value, "__self__", None), "__file__", None)
        if isinstance(path, str) and path.startswith(root + os.sep):
            with open(path, "rb") as f:
                files[os.path.relpath(path, root)] = f.read()
    return files


def dump(compiled: CompiledFxGraph) -> bytes:
    disk = copy.copy(compiled)
    disk.prepare_for_serialization()
    return pickle.dumps({"graph": pickle.dumps(disk), "kernels": _kernel_files(compiled)})


def _restore_kernel(root: str, relative: str, data: bytes) -> None:
    path = os.path.join(root, relative)
    if os.path.exists(path) and os.path.getsize(path) == len(data):
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def load(blob: bytes, host_inputs: list, is_backward: bool) -> CompiledFxGraph:
    """A compiled graph from dump()'s bytes; its kernels are put back where the wrapper will look for them."""
    saved = pickle.loads(blob)
    root = cache_dir()
    for relative, data in saved["kernels"].items():
        _restore_kernel(root, relative, data)
    compiled: CompiledFxGraph = pickle.loads(saved["graph"])
    constants = CompiledFxGraphConstants()
    compiled.after_deserialization(constants)
    compiled.post_compile(host_inputs, constants, {"cudagraphs": BoxedBool(False), "is_backward": is_backward})
    return compiled
