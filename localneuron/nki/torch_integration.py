"""Calling NKI kernels from PyTorch (contract §11).

* A `@nki.jit` kernel called with tensors runs on the simulator: inputs are copied to the host,
  the kernel runs, outputs come back as tensors on the inputs' device, and inputs the kernel
  wrote are updated in place.
* Under fake tensors (torch.compile tracing, meta kernels) the same call is a dry run: the
  kernel is specialised on shapes only, which yields its output shapes and dtypes (the role of
  TorchNeuron's `dump_config`), and empty tensors of those shapes are returned.
* `nki_op` registers a launcher as a torch custom op whose fake kernel is the launcher itself,
  so it runs in eager, appears as one node under torch.compile, and takes `register_autograd`.
* `wrap_nki(kernel)[grid](...)` launches a kernel on a grid.
"""
import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor

from .dtypes import as_dtype
from .kernel import HostArray, Kernel, Launch, execute

TORCH_DTYPES = {
    "float32": torch.float32, "tfloat32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
    "float8_e5m2": torch.float8_e5m2, "float8_e4m3fn": torch.float8_e4m3fn,
    # Neuron's IEEE-like e4m3 (max 240) fits inside e4m3fn, PyTorch's nearest type.
    "float8_e4m3": torch.float8_e4m3fn,
    "int8": torch.int8, "uint8": torch.uint8, "int16": torch.int16, "uint16": torch.uint16,
    "int32": torch.int32, "uint32": torch.uint32, "bool_": torch.bool,
}


def _is_tensor(value):
    return isinstance(value, torch.Tensor)


def _is_symbolic(t):
    return isinstance(t, FakeTensor) or t.device.type == "meta"


def _to_host(t, symbolic):
    dtype = as_dtype(t.dtype)
    if symbolic:
        return HostArray(None, dtype, tuple(t.shape))
    cpu = t.detach().to("cpu")
    data = cpu.float().numpy() if dtype.is_float else cpu.numpy()
    return HostArray(data, dtype, tuple(t.shape))


def _to_tensor(host, device, symbolic):
    dtype = TORCH_DTYPES[host.dtype.name]
    if symbolic:
        return torch.empty(host.shape, dtype=dtype, device=device)
    return torch.from_numpy(np.ascontiguousarray(host.data)).to(dtype).to(device)


def call_with_tensors(launch, args, kwargs):
    tensors = [a for a in list(args) + list(kwargs.values()) if _is_tensor(a)]
    symbolic = any(_is_symbolic(t) for t in tensors)
    device = tensors[0].device
    convert = (lambda v: _to_host(v, symbolic) if _is_tensor(v) else v)
    host_args = [convert(a) for a in args]
    host_kwargs = {k: convert(v) for k, v in kwargs.items()}
    if symbolic:
        execution = execute(launch.kernel, launch.grid, host_args, host_kwargs, numerics=False, record=False)
    else:
        with torch.profiler.record_function(f"nki::{launch.kernel.__name__}"):
            execution = execute(launch.kernel, launch.grid, host_args, host_kwargs)
        _write_back(execution, args, kwargs)
    return execution.outputs_as(lambda host: _to_tensor(host, device, symbolic))


def _write_back(execution, args, kwargs):
    """Inputs the kernel modified (declared in the op's mutates_args) receive the new values."""
    for position, name in enumerate(execution.argument_names):
        original = args[position] if position < len(args) else kwargs.get(name)
        if name in execution.written and _is_tensor(original):
            with torch.no_grad():
                original.copy_(_to_tensor(execution.written[name], original.device, False))


def nki_op(name, fn=None, mutates_args={}):
    """Register a launcher (allocate outputs, call NKI kernels) as the custom op `name`.

    Like torch.library.triton_op: the schema comes from the type hints, and the launcher is
    also the fake implementation, so it must allocate with torch.empty*/empty_like.
    """
    def register(launcher):
        op = torch.library.custom_op(name, mutates_args=mutates_args)(launcher)
        op.register_fake(launcher)
        return op
    return register if fn is None else register(fn)


class NkiKernelCaller:
    """What wrap_nki returns: call it, or index it with a grid first (`caller[grid](...)`)."""

    def __init__(self, kernel, grid=1):
        self.kernel = kernel if isinstance(kernel, Kernel) else Kernel(kernel, {})
        self.grid = grid

    def __getitem__(self, grid):
        if isinstance(grid, list):
            grid = tuple(grid)
        return NkiKernelCaller(self.kernel, grid)

    def __call__(self, *args, **kwargs):
        return call_with_tensors(Launch(self.kernel, self.grid), args, kwargs)


def wrap_nki(kernel):
    return NkiKernelCaller(kernel)
