"""@nki.jit kernels and how they run: nki.simulate, nki.benchmark and timing-only estimates.

Every kernel runs on the simulated NeuronCore (NKI_SIMULATOR=1 is therefore implied). Array
arguments become shared-HBM tensors; the kernel body runs as ordinary Python, so print and
breakpoint() work; each ISA call checks its constraints, computes its result with numpy
(unless the run is timing-only) and is scheduled by the cycle model.
"""
import functools
import inspect
import sys
from dataclasses import dataclass

import numpy as np

from . import buffers, calls, generation
from .cycle_model import KernelReport
from .dtypes import as_dtype, from_host, precise_fp, to_host
from .errors import NkiUsageError
from .lnc import LncGroup
from .run import KernelRun
from .tensor import NkiTensor, Storage


@dataclass(frozen=True)
class ShapeOnly:
    """An argument known only by shape and dtype: enough for a timing-only run."""
    shape: tuple
    dtype: object = "float32"


@dataclass
class HostArray:
    """Host values with the NKI dtype they stand for (numpy has no bfloat16 or fp8)."""
    data: object        # numpy array, or None when only the shape is known
    dtype: object
    shape: tuple


def host_array(value):
    if isinstance(value, HostArray):
        return value
    if isinstance(value, ShapeOnly):
        return HostArray(None, as_dtype(value.dtype), tuple(value.shape))
    if isinstance(value, np.ndarray):
        dtype = as_dtype(value.dtype)
        return HostArray(value, dtype, value.shape)
    return None


# Every kernel by creation order; torch.compile graphs refer to a kernel by its index here.
KERNELS = []


class Kernel:
    def __init__(self, fn, options):
        if "platform_target" in options:
            raise NkiUsageError("jit(platform_target=...) is not supported since NKI 0.3; "
                                "set NEURON_PLATFORM_TARGET_OVERRIDE=gen2|gen3|gen4 instead")
        self.fn = fn
        functools.update_wrapper(self, fn)
        # Registered eagerly: a compiled graph may name the kernel while Dynamo traces, when
        # registering it would only be recorded as a side effect.
        self.registry_index = len(KERNELS)
        KERNELS.append(self)

    def __getitem__(self, grid):
        """kernel[lnc] (1 or 2 NeuronCores) or a legacy SPMD grid kernel[gx, gy]."""
        return Launch(self, grid)

    def __call__(self, *args, **kwargs):
        return Launch(self, 1)(*args, **kwargs)

    def __repr__(self):
        return f"<nki kernel {self.fn.__name__}>"


class Launch:
    def __init__(self, kernel, grid):
        self.kernel = kernel
        self.grid = grid

    def __getitem__(self, grid):
        return Launch(self.kernel, grid)

    # Runs a launch whose arguments are torch tensors: installed by torch_integration, which the
    # package always imports (so this module does not import it back).
    with_tensors = None

    def __call__(self, *args, **kwargs):
        if _has_torch_tensor(args, kwargs):
            return Launch.with_tensors(self, args, kwargs)
        execution = execute(self.kernel, self.grid, args, kwargs)
        execution.write_back_numpy(args, kwargs)
        return execution.outputs_as(lambda host: host.data)


def jit(fn=None, **options):
    """Mark a function as an NKI kernel. `mode=` is accepted and ignored, as in NKI >= 0.3."""
    if fn is None:
        return lambda f: Kernel(f, options)
    return fn if isinstance(fn, Kernel) else Kernel(fn, options)


def _has_torch_tensor(args, kwargs):
    torch = sys.modules.get("torch")   # a tensor argument implies torch is already imported
    return torch is not None and any(isinstance(a, torch.Tensor) for a in list(args) + list(kwargs.values()))


# --- execution --------------------------------------------------------------------------------

@dataclass
class Execution:
    outputs: object          # the kernel's return value with HostArray leaves
    written: dict            # argument name -> HostArray for inputs the kernel modified
    report: KernelReport
    argument_names: list

    def outputs_as(self, convert):
        return _map_outputs(self.outputs, convert)

    def write_back_numpy(self, args, kwargs):
        """Inputs a kernel modified are updated in the caller's arrays, as AWS's simulator does."""
        for position, name in enumerate(self.argument_names):
            original = args[position] if position < len(args) else kwargs.get(name)
            if name in self.written and isinstance(original, np.ndarray):
                original[...] = self.written[name].data.astype(original.dtype, copy=False)


def _map_outputs(value, convert):
    if isinstance(value, HostArray):
        return convert(value)
    if isinstance(value, (tuple, list)):
        return type(value)(_map_outputs(v, convert) for v in value)
    if isinstance(value, dict):
        return {k: _map_outputs(v, convert) for k, v in value.items()}
    return value


def _bind(kernel, args, kwargs):
    signature = inspect.signature(kernel.fn)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    return bound


def _argument_storage(name, host, numerics, precise):
    data = None
    if numerics:
        if host.data is None:
            raise NkiUsageError(f"argument {name!r} has no values; numerics runs need arrays, not ShapeOnly")
        data = from_host(host.data, host.dtype, precise).reshape(-1).copy()
    return Storage(host.shape, host.dtype, buffers.shared_hbm, name, data)


def _output(value, numerics):
    if isinstance(value, NkiTensor):
        if value.buffer is not buffers.shared_hbm:
            raise NkiUsageError(f"kernel output {value.name!r} is in {value.buffer}; since NKI 0.3 every "
                                f"returned tensor must be allocated with buffer=nl.shared_hbm")
        return HostArray(to_host(value.read(), value.dtype) if numerics else None, value.dtype, value.shape)
    if isinstance(value, (tuple, list)):
        return type(value)(_output(v, numerics) for v in value)
    if isinstance(value, dict):
        return {k: _output(v, numerics) for k, v in value.items()}
    return value


def _grid_shape(grid):
    """(grid shape, instances run in parallel?): an LNC degree runs on parallel cores, a legacy
    SPMD grid runs its instances one after another on one core."""
    if isinstance(grid, int):
        if grid not in (1, 2):
            raise NkiUsageError(f"kernel[{grid}]: the LNC degree must be 1 or 2")
        return (grid,), True
    return tuple(int(g) for g in grid), False


def execute(kernel, grid, args, kwargs, numerics=True, record=True, keep_trace=False):
    target = generation.current()
    precise = precise_fp()
    bound = _bind(kernel, args, kwargs)
    argument_names = list(bound.arguments)
    storages = {}
    for name, value in bound.arguments.items():
        host = host_array(value)
        if host is not None:                 # anything else is a compile-time constant
            storages[name] = _argument_storage(name, host, numerics, precise)
            bound.arguments[name] = NkiTensor(storages[name])
    shape, parallel = _grid_shape(grid)
    shared_allocations = []
    runs = [KernelRun(kernel.__name__, target, numerics, precise, shape, instance, keep_trace, shared_allocations)
            for instance in range(int(np.prod(shape)))]
    body = (lambda: kernel.fn(*bound.args, **bound.kwargs))
    written = set()
    if parallel and len(runs) > 1:
        # The cores of a logical core run together (they may exchange data) on one clock.
        returned = LncGroup(runs).run(body)[-1]
    else:
        for run in runs:
            # SPMD programs run one after another: each starts with idle engines and queues.
            for storage in storages.values():
                storage.reads.clear()
                storage.writes.clear()
            with run.active():
                returned = body()
            written.update(name for name, s in storages.items() if s.writes)
    written.update(name for name, s in storages.items() if s.writes)
    outputs = _output(returned, numerics)
    reports = [run.report(trace=keep_trace) for run in runs]
    report = _combine(reports, parallel)
    report.outputs = outputs
    if record:
        calls.record(report)
    written_hosts = {name: HostArray(to_host(storages[name].data.reshape(storages[name].shape), storages[name].dtype)
                                     if numerics else None,
                                     storages[name].dtype, storages[name].shape) for name in written}
    return Execution(outputs, written_hosts, report, argument_names)


def _combine(reports, parallel):
    if len(reports) == 1:
        return reports[0]
    if parallel:
        return max(reports, key=lambda r: r.latency_ns)
    first = reports[0]
    busy = {e: sum(r.engine_busy_ns[e] for r in reports) for e in first.engine_busy_ns}
    counts = {}
    for r in reports:
        for op, n in r.instruction_counts.items():
            counts[op] = counts.get(op, 0) + n
    return KernelReport(first.kernel, first.target, sum(r.latency_ns for r in reports), busy, counts,
                        max(r.sbuf_peak_bytes for r in reports), max(r.psum_peak_bytes for r in reports),
                        first.numerics)


# --- public runners --------------------------------------------------------------------------

_KERNEL_OF_FUNCTION = {}   # kernels live as long as KERNELS anyway


def _as_launch(kernel):
    """What simulate/benchmark run: a launch (`kernel[grid]`) as it is; a kernel or plain function on
    one core (a plain function becomes one Kernel, however often it is run)."""
    if isinstance(kernel, Launch):
        return kernel
    if isinstance(kernel, Kernel):
        return Launch(kernel, 1)
    if not callable(kernel):
        raise NkiUsageError(f"nki.simulate/benchmark take a kernel, kernel[grid] or a function, got {kernel!r}")
    if kernel not in _KERNEL_OF_FUNCTION:
        _KERNEL_OF_FUNCTION[kernel] = Kernel(kernel, {})
    return Launch(_KERNEL_OF_FUNCTION[kernel], 1)


def simulate(kernel):
    """nki.simulate(kernel)(*args) or nki.simulate(kernel[grid])(*args): run on the CPU simulator;
    numpy in, numpy out (torch in, torch out)."""
    return _as_launch(kernel)


# AWS's simulator entry point, `nki.cpu_simulate(kernel)[lnc](**inputs)`, as the NKI Library's tests call it.
cpu_simulate = simulate


def simulate_kernel(kernel, *args, **kwargs):
    """Legacy spelling: nki.simulate_kernel(kernel, *args)."""
    return simulate(kernel)(*args, **kwargs)


def benchmark(kernel, numerics=True, trace=False):
    """nki.benchmark(kernel)(*args) -> KernelReport (estimated latency, per-engine busy time,
    bottleneck, outputs). With numerics=False only shapes are used (arguments may be ShapeOnly),
    so large kernels are costed in seconds."""
    launch = _as_launch(kernel)

    def run(*args, **kwargs):
        execution = execute(launch.kernel, launch.grid, args, kwargs, numerics=numerics, keep_trace=trace)
        report = execution.report
        report.outputs = execution.outputs_as(lambda host: host.data if numerics else ShapeOnly(host.shape, host.dtype))
        return report
    return run
