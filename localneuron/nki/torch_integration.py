"""Calling NKI kernels from PyTorch (docs/support-matrix.md#nki).

* A `@nki.jit` kernel called with tensors runs on the simulator: inputs are copied to the host,
  the kernel runs, outputs come back as tensors on the inputs' device, and inputs the kernel
  wrote are updated in place.
* Under fake tensors (torch.compile tracing, meta kernels) the same call is a dry run: the
  kernel is specialised on shapes only, which yields its output shapes and dtypes (the role of
  TorchNeuron's `dump_config`), and empty tensors of those shapes are returned.
* `nki_op` registers a launcher as a torch custom op whose fake kernel is the launcher itself,
  so it runs in eager, appears as one node under torch.compile, and takes `register_autograd`.
* `wrap_nki(kernel)[grid](...)` launches a kernel on a grid.
* Inside torch.compile, a kernel call (direct, or through wrap_nki) becomes one node of the
  generic op `localneuron_nki::launch`, which names the kernel by its registry index and
  carries the grid and compile-time constants as a literal string.
"""
import ast

import numpy as np
import torch
from torch._subclasses.fake_tensor import FakeTensor

from localneuron.costmodel.work import price_kernel
from localneuron.runtime import line_time, trace_events

from .dtypes import as_dtype
from .errors import NkiUsageError
from .kernel import KERNELS, HostArray, Kernel, Launch, execute

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


def _host_view(t):
    """A CPU tensor over the same memory. The kernel runs on the (simulated) device, so reading
    and writing its operands must not count as host<->device transfers."""
    if t.device.type == "neuron":
        from localneuron import _C
        return _C.cpu_alias(t)
    return t


def _to_host(t, symbolic):
    dtype = as_dtype(t.dtype)
    if symbolic:
        return HostArray(None, dtype, tuple(t.shape))
    view = _host_view(t.detach())
    data = view.float().numpy() if dtype.is_float else view.numpy()
    return HostArray(data, dtype, tuple(t.shape))


def _to_tensor(host, device, symbolic):
    if host.dtype.name not in TORCH_DTYPES:
        raise NkiUsageError(f"a kernel output of NKI type {host.dtype} has no PyTorch dtype; return it "
                            f"converted (e.g. to uint8/uint32 raw items) or call the kernel with numpy arrays")
    out = torch.empty(host.shape, dtype=TORCH_DTYPES[host.dtype.name], device=device)
    if not symbolic:
        values = host.data.astype(np.float32) if host.dtype.is_float else host.data
        _host_view(out).copy_(torch.from_numpy(np.ascontiguousarray(values)))
    return out


def call_with_tensors(launch, args, kwargs):
    if torch.compiler.is_compiling():
        return _launch_in_graph(launch, args, kwargs)
    return _call_on_host(launch, args, kwargs)


Launch.with_tensors = staticmethod(call_with_tensors)


def _call_on_host(launch, args, kwargs):
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
            start = trace_events.now_ns() if trace_events.recording() else None
            execution = execute(launch.kernel, launch.grid, host_args, host_kwargs)
            report = execution.report
            work = price_kernel(launch.kernel.__name__, report.latency_ns, report.engine_busy_ns)
            line_time.note(work.seconds)
            if start is not None:
                trace_events.record(work, device.index, start, source="cycle model")
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


# --- one graph node per kernel call under torch.compile -------------------------------------

def _split(args, kwargs):
    """Tensors in call order, and a literal template of the call with tensors as ('t', index)."""
    tensors, template_args, template_kwargs = [], [], {}
    for value in args:
        template_args.append(("t", len(tensors)) if _is_tensor(value) else ("c", value))
        if _is_tensor(value):
            tensors.append(value)
    for key, value in kwargs.items():
        template_kwargs[key] = ("t", len(tensors)) if _is_tensor(value) else ("c", value)
        if _is_tensor(value):
            tensors.append(value)
    return tensors, template_args, template_kwargs


def _plan_call(kernel_index, grid, template_args, template_kwargs, tensor_meta):
    """Specialise the call on shapes while Dynamo traces: the literal config for the graph node
    and whether the kernel writes its inputs (which picks the in-place op)."""
    shaped = [HostArray(None, as_dtype(dtype), shape) for shape, dtype in tensor_meta]
    pick = (lambda entry: shaped[entry[1]] if entry[0] == "t" else entry[1])
    execution = execute(KERNELS[kernel_index], grid, [pick(e) for e in template_args],
                        {k: pick(e) for k, e in template_kwargs.items()}, numerics=False, record=False)
    return repr((grid, template_args, template_kwargs)), bool(execution.written)


# torch._dynamo.assume_constant_result(_plan_call), which only sets this attribute, without importing Dynamo at
# `import nki` (about 2 s of every NKI Library file's start-up); tests/nki/test_nki_torch.py checks that the
# decorator still does no more than that.
_plan_call._dynamo_marked_constant = True


def _launch_in_graph(launch, args, kwargs):
    tensors, template_args, template_kwargs = _split(args, kwargs)
    meta = tuple((tuple(t.shape), t.dtype) for t in tensors)
    config, writes_inputs = _plan_call(launch.kernel.registry_index, launch.grid, tuple(template_args),
                                       template_kwargs, meta)
    if writes_inputs:
        torch.ops.localneuron_nki.launch_inplace(launch.kernel.registry_index, config, tensors)
        return None
    outputs = torch.ops.localneuron_nki.launch(launch.kernel.registry_index, config, tensors)
    return outputs[0] if len(outputs) == 1 else tuple(outputs)


def _flatten(value):
    if _is_tensor(value):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _flatten(v)]
    return []


def _run_config(kernel_index, config, tensors):
    grid, template_args, template_kwargs = ast.literal_eval(config)
    pick = (lambda entry: tensors[entry[1]] if entry[0] == "t" else entry[1])
    args = [pick(entry) for entry in template_args]
    kwargs = {key: pick(entry) for key, entry in template_kwargs.items()}
    return _call_on_host(Launch(KERNELS[kernel_index], grid), args, kwargs)


def _launch_outputs(kernel_index: int, config: str, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    return _flatten(_run_config(kernel_index, config, tensors))


def _launch_inplace(kernel_index: int, config: str, tensors: list[torch.Tensor]) -> None:
    _run_config(kernel_index, config, tensors)


# Each launcher is also its own fake kernel: on fake tensors _call_on_host makes a shape-only dry run.
_launch_op = torch.library.custom_op("localneuron_nki::launch", mutates_args=())(_launch_outputs)
_launch_op.register_fake(_launch_outputs)
_launch_inplace_op = torch.library.custom_op("localneuron_nki::launch_inplace", mutates_args={"tensors"})(_launch_inplace)
_launch_inplace_op.register_fake(_launch_inplace)


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
