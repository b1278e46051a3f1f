"""The host code generator: Inductor's C++ backend compiles a CPU graph into fused kernels, and a
compiled graph is saved to bytes and loaded back without running the code generator again.

Inductor keeps its generated sources and built kernels (.so) in TORCHINDUCTOR_CACHE_DIR, and loads
whatever it finds there. So it works only in directories nobody else can write: while compiling, in
the private compile cache's `host-kernels` (kept between processes: Inductor's CPU probes and built
kernels are reused) or else a private directory of this process; while loading a stored graph, always
in the process's private directory, where the stored kernels and wrapper are written from the
checked payload, so what runs is exactly what was stored. Inductor's own FX graph cache is switched
off (our entries replace it) and its file locks wait at most the cache's lock timeout.

The payload is data, not a pickle of the whole: a JSON header, the pickled CompiledFxGraph (which
cache.py only hands over once the entry is authenticated), then the kernel libraries, each named in
the header by its source digest and the sha256 of its bytes, checked before it is written or loaded.
"""
import contextlib
import copy
import functools
import hashlib
import json
import os
import pickle
import re
import time

import filelock
import torch
import torch.utils._filelock
from torch._inductor import config as inductor_config
from torch._inductor.async_compile import AsyncCompile
from torch._inductor.codecache import CppPythonBindingsCodeCache
from torch._inductor.compile_fx import compile_fx_inner
from torch._inductor.output_code import CompiledFxGraph, CompiledFxGraphConstants
from torch._inductor.utils import BoxedBool

from localneuron.compiler.settings import log
from localneuron.runtime.process_dirs import process_directory
from localneuron.runtime import checked_files
from localneuron.runtime.environment import overriding

HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
KERNEL_HOME_PREFIX = "localneuron-kernels-"
STORED_KERNELS = "stored"  # inside the private directory: the kernels of loaded entries, named by sha256

# Random ops stay calls of their eager kernels, in graph order, drawing from the CPU's default generator as the
# same ops do in eager (localneuron/device/random.py, rule 1); by default AOTAutograd's decompositions and Inductor
# replace them with Inductor's own seeded kernels, which draw other values.
random_ops_as_eager = functools.partial(inductor_config.patch, fallback_random=True)


def private_home() -> str:
    """A 0700 directory of this process's own, removed when it exits (or, if it is killed, by a later process)."""
    return process_directory(KERNEL_HOME_PREFIX)


class _BoundedFileLock(torch.utils._filelock.FileLock):
    """Inductor's file lock, waiting at most until `deadline` (time.monotonic()) and then going on
    unlocked, like the cache's own lock: one budget for every lock a compile waits for."""
    deadline = float("inf")

    def __enter__(self):
        self.acquired = False
        try:
            self.acquire(timeout=max(0.0, self.deadline - time.monotonic()))
            self.acquired = True
        except filelock.Timeout:
            log.warning("Code generator lock %s still held when the wait allowed by TORCH_NEURONX_NEFF_CACHE_"
                        "LOCK_TIMEOUT ran out; going on without it.", self.lock_file)
        return self

    def __exit__(self, *exc_info):
        if self.acquired:
            self.release()


@contextlib.contextmanager
def inductor_home(directory: str, lock_deadline: float = float("inf")):
    """Inductor working in directory, in this process only (worker processes would not see the lock
    bound), its file locks waited for until lock_deadline at most."""
    saved = torch.utils._filelock.FileLock, _BoundedFileLock.deadline
    torch.utils._filelock.FileLock, _BoundedFileLock.deadline = _BoundedFileLock, lock_deadline
    try:
        with overriding("TORCHINDUCTOR_CACHE_DIR", directory), \
                inductor_config.patch(fx_graph_cache=False, autotune_local_cache=False, compile_threads=1):
            yield
    finally:
        torch.utils._filelock.FileLock, _BoundedFileLock.deadline = saved


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


def compile_graph(gm: torch.fx.GraphModule, host_inputs: list, is_backward: bool, home: str | None,
                  lock_deadline: float) -> CompiledFxGraph:
    """Compiles with Inductor in home (None: the private directory), waiting for its locks until
    lock_deadline at most; the result's `localneuron_kernels` maps each kernel's source digest to its
    built library."""
    built = {}

    def record(original, self, argtypes, source_code):
        built[_digest(source_code)] = result = original(self, argtypes, source_code)
        return result

    with inductor_home(home or private_home(), lock_deadline), _kernel_loading(record):
        compiled = compile_fx_inner(gm, host_inputs, is_backward=is_backward)
    compiled.localneuron_kernels = {}
    for digest, result in built.items():
        fn = result.result() if hasattr(result, "result") else result
        compiled.localneuron_kernels[digest] = fn.__self__.__file__
    return compiled


def dump(compiled: CompiledFxGraph) -> bytes:
    kernels = []
    for digest, path in compiled.localneuron_kernels.items():
        with open(path, "rb") as f:
            kernels.append((digest, f.read()))
    disk = copy.copy(compiled)
    del disk.localneuron_kernels  # paths of this process's; the kernels themselves follow the graph
    disk.prepare_for_serialization()
    graph = pickle.dumps(disk)
    header = json.dumps({"graph": len(graph),
                         "kernels": [[digest, hashlib.sha256(data).hexdigest(), len(data)] for digest, data in kernels]})
    return b"%d\n" % len(header) + header.encode() + graph + b"".join(data for _, data in kernels)


class BadPayload(ValueError):
    """A payload that does not have dump()'s layout, or whose kernels do not hash to what it says."""


def _is_size(value) -> bool:
    return type(value) is int and value >= 0


def _unpack(payload: bytes) -> tuple[bytes, dict]:
    """The pickled graph and {source digest: (sha256, library bytes)}, every part checked."""
    length, _, rest = payload.partition(b"\n")
    if not (length.isdigit() and int(length) <= len(rest)):
        raise BadPayload("no header")
    try:
        header = json.loads(rest[:int(length)])
        graph_size, kernels = header["graph"], header["kernels"]
    except (ValueError, TypeError, KeyError) as error:
        raise BadPayload(f"unreadable header: {error}") from None
    if not (_is_size(graph_size) and isinstance(kernels, list) and all(
            isinstance(k, list) and len(k) == 3 and all(isinstance(d, str) and HEX_DIGEST.fullmatch(d) for d in k[:2])
            and _is_size(k[2]) for k in kernels)):
        raise BadPayload("malformed header: kernels must be [source sha256, library sha256, size] in hex")
    body = memoryview(rest)[int(length):]
    if len(body) != graph_size + sum(size for _, _, size in kernels):
        raise BadPayload(f"{len(body)} bytes after the header, not the {graph_size} + kernels it lists")
    graph, offset, libraries = bytes(body[:graph_size]), graph_size, {}
    for source_digest, sha256, size in kernels:
        data = bytes(body[offset:offset + size])
        offset += size
        if hashlib.sha256(data).hexdigest() != sha256:
            raise BadPayload(f"stored kernel {sha256[:12]}... does not hash to its recorded sha256")
        libraries[source_digest] = (sha256, data)
    return graph, libraries


def _write_private(sha256: str, data: bytes) -> str:
    """The library's path in the private directory, written there (from checked bytes) on first use."""
    directory = os.path.join(private_home(), STORED_KERNELS)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, sha256 + ".so")
    if not os.path.exists(path):
        dir_fd = os.open(directory, os.O_RDONLY | checked_files.DIRECTORY)
        try:
            checked_files.write_atomic(dir_fd, sha256 + ".so", data, mode=0o500)
        finally:
            os.close(dir_fd)
    return path


def load(payload: bytes, host_inputs: list, is_backward: bool) -> CompiledFxGraph:
    """A compiled graph from dump()'s bytes (already authenticated: this unpickles), running the kernels
    stored with it.

    The wrapper's kernels are loaded straight from the stored libraries: Inductor would first derive
    each library's name from its compiler command line, which probes the CPU's vector extensions by
    building and running test programs (seconds per process), only to find the same library."""
    graph, kernels = _unpack(payload)
    libraries = {digest: (sha256, _write_private(sha256, data)) for digest, (sha256, data) in kernels.items()}

    def load_stored(original, self, argtypes, source_code):
        stored = libraries.get(_digest(source_code))
        if stored is None:  # not stored (an entry from another Inductor setup): let Inductor build it
            return original(self, argtypes, source_code)
        sha256, path = stored
        module = CppPythonBindingsCodeCache._load_library_inner(path, f"stored_{sha256}")
        return getattr(module, CppPythonBindingsCodeCache.entry_function)

    compiled: CompiledFxGraph = pickle.loads(graph)
    constants = CompiledFxGraphConstants()
    with inductor_home(private_home()), _kernel_loading(load_stored):
        compiled.after_deserialization(constants)
    compiled.post_compile(host_inputs, constants, {"cudagraphs": BoxedBool(False), "is_backward": is_backward})
    return compiled
