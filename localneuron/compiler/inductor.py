"""The host code generator: Inductor's C++ backend compiles a CPU graph into fused kernels, and a
compiled graph is saved to bytes and loaded back without running the code generator again.

Inductor keeps its generated sources and built kernels (.so) in TORCHINDUCTOR_CACHE_DIR. While the
backend compiles or loads, that variable points at a directory the backend owns (inside the
persistent cache, or a private temporary directory when the cache is off). Inductor's own FX graph
cache is switched off: our cache entries (cache.py) replace it and carry the built kernels with them.
"""
import contextlib
import copy
import hashlib
import os
import pickle
import tempfile

import torch
from torch._inductor import config as inductor_config
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.codecache import CppPythonBindingsCodeCache
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


def _digest(source_code: str) -> str:
    return hashlib.sha256(source_code.encode()).hexdigest()


@contextlib.contextmanager
def _kernel_loading(replace):
    """Routes the generated wrapper's `async_compile.cpp_pybinding(argtypes, source)` calls (one per C++
    kernel) through `replace(original, self, argtypes, source)` while compiling or loading a graph."""
    original = AsyncCompile.cpp_pybinding

    def cpp_pybinding(self, argtypes, source_code):
        return replace(original, self, argtypes, source_code)

    AsyncCompile.cpp_pybinding = cpp_pybinding
    try:
        yield
    finally:
        AsyncCompile.cpp_pybinding = original


def compile_graph(gm: torch.fx.GraphModule, host_inputs: list, is_backward: bool) -> CompiledFxGraph:
    """Compiles with Inductor; the result's `kernels` maps each kernel source digest to its built library."""
    built = {}

    def record(original, self, argtypes, source_code):
        built[_digest(source_code)] = result = original(self, argtypes, source_code)
        return result

    with _kernel_loading(record):
        compiled = compile_fx_inner(gm, host_inputs, is_backward=is_backward)
    root = cache_dir()
    compiled.localneuron_kernels = {}
    for digest, result in built.items():
        fn = result.result() if hasattr(result, "result") else result
        compiled.localneuron_kernels[digest] = os.path.relpath(fn.__self__.__file__, root)
    return compiled


def dump(compiled: CompiledFxGraph) -> bytes:
    root = cache_dir()
    kernels = {}
    for digest, relative in compiled.localneuron_kernels.items():
        with open(os.path.join(root, relative), "rb") as f:
            kernels[digest] = (relative, f.read())
    disk = copy.copy(compiled)
    disk.prepare_for_serialization()
    return pickle.dumps({"graph": pickle.dumps(disk), "kernels": kernels})


def _restore_kernel(root: str, relative: str, data: bytes) -> str:
    path = os.path.join(root, relative)
    if not (os.path.exists(path) and os.path.getsize(path) == len(data)):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return path


def load(blob: bytes, host_inputs: list, is_backward: bool) -> CompiledFxGraph:
    """A compiled graph from dump()'s bytes, running the kernels stored with it.

    The wrapper's kernels are loaded straight from the stored libraries: Inductor would first derive
    each library's name from its compiler command line, which probes the CPU's vector extensions by
    building and running test programs (seconds per process), only to find the same library."""
    saved = pickle.loads(blob)
    root = cache_dir()
    libraries = {digest: _restore_kernel(root, relative, data) for digest, (relative, data) in saved["kernels"].items()}

    def load_stored(original, self, argtypes, source_code):
        path = libraries.get(_digest(source_code))
        if path is None:  # not stored (an entry from another Inductor setup): let Inductor build it
            return original(self, argtypes, source_code)
        key = os.path.basename(path).split(".")[0]
        module = CppPythonBindingsCodeCache._load_library_inner(path, key)
        return getattr(module, CppPythonBindingsCodeCache.entry_function)

    compiled: CompiledFxGraph = pickle.loads(saved["graph"])
    constants = CompiledFxGraphConstants()
    with _kernel_loading(load_stored):
        compiled.after_deserialization(constants)
    compiled.post_compile(host_inputs, constants, {"cudagraphs": BoxedBool(False), "is_backward": is_backward})
    return compiled
