"""A fused executable as a C++ program (csrc/fusion/fusion.cpp FusedKernels), run by the worker without Python.

The code generator's host wrapper for a fused run is a short Python function: it allocates buffers
(`empty_strided_cpu`), calls the generated C++ kernels (`extern "C" kernel(...)`, data pointers only)
and returns buffers. Calling it under the GIL for every run costs more than the ops it replaces, so
it is read off once, at compile time, by running a copy of it with recording stand-ins for those
three names on scratch inputs: which kernel gets which input or buffer, in order, and which buffer
(or input) each result is. A wrapper that uses anything else (views of buffers, extern kernels,
memory pools, scalar arguments) is not read: that run keeps its Python wrapper.
"""
import ctypes
import dis
import types

import torch

from localneuron import _C

# Names the wrapper may use besides its kernels; the stand-ins below replace the allocating one.
_HARMLESS = {"torch", "assert_size_stride", "assert_alignment"}
_ALLOCATE = "empty_strided_cpu"


class NotReadable(Exception):
    """The wrapper does something the C++ program does not reproduce."""


def _kernel_address(fn) -> int | None:
    """The address of the extern "C" kernel behind a generated kernel's Python binding, else None."""
    module = getattr(fn, "__self__", None)
    path = getattr(module, "__file__", None)
    if getattr(fn, "__name__", None) != "kernel" or not isinstance(path, str) or not path.endswith(".so"):
        return None
    # The library is loaded already (as the binding's module): this only looks the symbol up in it.
    return ctypes.cast(ctypes.CDLL(path).kernel, ctypes.c_void_p).value


def _zeros_laid_out_as(t: torch.Tensor) -> torch.Tensor:
    """Zeros with t's sizes and strides, views and broadcasts included (zeros_like makes those dense)."""
    span = 1 + sum((n - 1) * s for n, s in zip(t.shape, t.stride())) if t.numel() else 0
    return torch.zeros(span, dtype=t.dtype).as_strided(t.shape, t.stride())


def _wrapper_function(compiled):
    runner = getattr(compiled, "compiled_fn_runner", None)
    call = getattr(type(runner), "call", None)
    if not isinstance(call, types.FunctionType):
        raise NotReadable("the compiled graph has no Python wrapper function")
    return call, runner


def read_program(compiled, inputs: list, python_run) -> "_C.FusedKernels":
    """The C++ program of `compiled` (a CompiledFxGraph) for inputs laid out as `inputs`; raises NotReadable."""
    call, runner = _wrapper_function(compiled)
    names = {i.argval for i in dis.get_instructions(call) if i.opname == "LOAD_GLOBAL"}
    module_globals = call.__globals__
    replaced = dict(module_globals)
    buffers = []  # the wrapper's allocations, kept alive so that ids stay unique; C++ reads their layouts
    where = {}    # id of a tensor the wrapper handles -> its operand code (FusedKernels' encoding)
    calls = []    # (kernel address, operand codes)

    def allocate(size, stride, dtype):
        t = torch.empty_strided(size, stride, dtype=dtype)
        where[id(t)] = _C.FusedKernels.buffer_operand(len(buffers))
        buffers.append(t)
        return t

    def stand_in(address):
        def record(*args):
            operands = []
            for a in args:
                if not isinstance(a, torch.Tensor) or id(a) not in where:
                    raise NotReadable(f"a kernel argument is not an input or a buffer: {type(a).__name__}")
                operands.append(where[id(a)])
            calls.append((address, operands))
        return record

    for name in names:
        if name in _HARMLESS:
            continue
        if name == _ALLOCATE:
            replaced[name] = allocate
            continue
        address = _kernel_address(module_globals.get(name))
        if address is None:
            raise NotReadable(f"the wrapper uses {name}")
        replaced[name] = stand_in(address)
    scratch = [_zeros_laid_out_as(t) for t in inputs]
    for k, t in enumerate(scratch):
        where[id(t)] = _C.FusedKernels.input_operand(k)
    recording = types.FunctionType(call.__code__, replaced, call.__name__, call.__defaults__, call.__closure__)
    results = recording(runner, list(scratch))
    outputs = []
    for r in results:
        if not isinstance(r, torch.Tensor) or id(r) not in where:
            raise NotReadable("a result is not a buffer or an input")
        outputs.append(where[id(r)])
    return _C.FusedKernels(buffers, calls, outputs, len(inputs), python_run)
