"""Compiling an op signature: decides how the executable runs, and runs the routes that need Python.

The C++ executor calls on_miss() once per new op signature, then keeps the decision: Route.DEVICE runs
the host kernel on zero-copy aliases in C++ (also the CPU fallbacks queueing.QUEUED_FALLBACKS lists);
Route.PYTHON runs the other fallbacks or the 64-bit policy below.
The contract (routes, callbacks) is csrc/executor/executor_contract.h; a decision may depend only on what
the call's signature covers (csrc/executor/signature.h): not on the value of a Scalar, float or string
argument, which every later call with that signature may change.
"""
import functools
import sys
import time

import torch

from localneuron import _C
from localneuron.ops import arguments, downcast, fallback, lowering_errors, queueing, support, tracking, whole_ops
from localneuron.ops.op_records import (CPU_FALLBACK, HOST_KERNEL_FIXES, INDEX_OPS, OPS, RUN_ON_HOST, UNSUPPORTED,
                                       lowering_error_checks)
from localneuron.costmodel.ops import fused_seconds
from localneuron.costmodel.work import DeviceWork, price_op
from localneuron.runtime import call_sites, counters
from localneuron.runtime.config import selected_target
from localneuron.runtime.environment import read

from localneuron._C import Route

FALLBACK_ERROR_VAR = "LOCALNEURON_FALLBACK_ERROR"
ONLY_UNIMPLEMENTED_VAR = "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"
# op -> the check of TorchNeuron's lowering for its calls (the records' lowering_error; ops/lowering_errors.py)
LOWERING_ERRORS = lowering_error_checks()

_expected_dtypes: dict[int, list] = {}
_wide_dtypes: dict[int, frozenset] = {}  # executable id -> its 64-bit tensor dtypes (the signature fixes them)
_host_kernel_fixes: dict = {}  # executable id -> HostKernelFix
_composite_kernel_runs: set[int] = set()  # executable ids of whole factories given a device (whole_ops.names_a_device)


def _describe(args, kwargs) -> str:
    parts = []
    for t in arguments.neuron_tensors(args, kwargs):
        parts.append(f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}")
    return ", ".join(parts)


def classify(op, args, kwargs, device_type: str = "neuron") -> tuple[str, bool]:
    """(kind, listed): how TorchNeuron runs this call -- a view, a CPU fallback, native with 64-bit
    tensors computed in 32 bits, or native. `localneuron estimate` asks the same question of fake tensors."""
    schema = op._schema
    name = schema.name
    if name in UNSUPPORTED:
        raise NotImplementedError(f"{name}: {UNSUPPORTED[name]}")
    rule, listed = support.rule_for(name, arguments.dtypes_of(args, kwargs, device_type))
    if arguments.returns_view(schema):
        return tracking.VIEW, listed
    if rule == CPU_FALLBACK:
        return tracking.FALLBACK, listed
    if arguments.uses_64bit(args, kwargs, ignore_int64=name in INDEX_OPS, device_type=device_type):
        return tracking.NATIVE_32BIT, listed
    return tracking.NATIVE, listed


def on_miss(op, args, kwargs):
    """The executor found no executable for this call's signature: build one (TorchNeuron compiles the op here)."""
    start = time.perf_counter_ns()
    built = _build_executable(op, args, kwargs)
    counters.eager_compiled(time.perf_counter_ns() - start)
    return built


def _build_executable(op, args, kwargs):
    schema = op._schema
    name = schema.name
    if name in UNSUPPORTED:
        raise NotImplementedError(f"{name}: {UNSUPPORTED[name]}")
    lowering_rule = lowering_errors.rule_for(schema, LOWERING_ERRORS.get(name))
    if lowering_rule is not None:  # at the call, before anything is cached or queued
        error = lowering_rule(arguments.bind(schema, args, kwargs))
        if error is not None:
            raise error
    tracked = tracking.tracked_name(name, schema.overload_name)
    if name not in RUN_ON_HOST:
        _check_host_kernel_exists(tracked)
    kind, listed = classify(op, args, kwargs)
    fix = HOST_KERNEL_FIXES.get(name)
    fix = fix if fix is not None and kind != tracking.FALLBACK and fix.applies(args, kwargs) else None
    composite = kind != tracking.FALLBACK and whole_ops.names_a_device(op, args, kwargs)
    if kind == tracking.VIEW:
        route = Route.DEVICE
    elif kind == tracking.FALLBACK:
        if read(FALLBACK_ERROR_VAR):
            raise RuntimeError(
                f"{tracked} has no Neuron implementation and would run as a CPU fallback "
                f"({FALLBACK_ERROR_VAR}=1 makes every CPU fallback an error). Move this computation to the "
                f"CPU explicitly, replace the op, or unset {FALLBACK_ERROR_VAR}.")
        route = Route.DEVICE if name in queueing.QUEUED_FALLBACKS else Route.PYTHON
        if route == Route.DEVICE:  # runs in C++ from now on: warned and attributed here, once
            call_sites.record(call_sites.CPU_FALLBACK, tracked)
            _warn_fallback(tracked)
    elif fix is not None or name in RUN_ON_HOST or composite:
        kind, route = tracking.NATIVE, Route.PYTHON
    elif kind == tracking.NATIVE_32BIT:
        # int64 arithmetic on in-range values, wrapped afterwards, is exactly the int32 computation;
        # float64 must really be computed in float32 (downcast.py)
        route = Route.PYTHON if arguments.uses_float64(args, kwargs) else Route.DEVICE_WRAP_INT64
        if route == Route.DEVICE_WRAP_INT64 and not _called_by_tensor_printing():
            call_sites.record(call_sites.SIXTY_FOUR_BIT, tracked)  # runs in C++ from now on: attributed here, once
        _warn_64bit(_sixty_four_bit_dtypes(args, kwargs))
    else:
        route = Route.DEVICE
    static_shapes, outputs = (False, None) if kind == tracking.VIEW else arguments.run_on_meta(op, args, kwargs)
    work, compiled = (None, 0.0) if kind == tracking.VIEW else _priced(
        name, args, kwargs, outputs if static_shapes else None, kind == tracking.FALLBACK)
    executable_id = tracking.register(tracking.Executable(
        op=name, overload=schema.overload_name, kind=kind, listed=listed, signature=_describe(args, kwargs),
        work=work, estimated_compiled_seconds=compiled))
    if kind == tracking.NATIVE_32BIT:
        _expected_dtypes[executable_id] = downcast.expected_output_dtypes(op, args, kwargs)
        _wide_dtypes[executable_id] = _sixty_four_bit_dtypes(args, kwargs)
    if fix is not None:
        _host_kernel_fixes[executable_id] = fix
    if composite:
        _composite_kernel_runs.add(executable_id)
    execution = queueing.execution_of(op, route, kind == tracking.VIEW, args, kwargs, static_shapes)
    return route, execution, executable_id, int((work.seconds if work is not None else 0.0) * 1e9)


def _priced(name, args, kwargs, outputs, on_host: bool) -> tuple[DeviceWork, float]:
    """The op's DeviceWork per call on the simulated target, and its seconds inside a compiled graph, priced on
    the outputs its meta kernel gave. Without them (output shapes that depend on the data) the outputs are
    taken to be about as large as the largest operand."""
    tensors = arguments.neuron_tensors(args, kwargs)
    if outputs is None:
        outputs = [max(tensors, key=lambda t: t.numel())] if tensors else []
    else:
        outputs = arguments.neuron_tensors(outputs, {}, device_type="meta")
    target = selected_target()
    return price_op(target, name, tensors, outputs, on_host), fused_seconds(target, name, tensors, outputs, on_host)


def _check_host_kernel_exists(qualified: str) -> None:
    """Ops that only CUDA (cuDNN, MIOpen...) implements reach here when called directly on the device."""
    if not torch._C._dispatch_has_computed_kernel_for_dispatch_key(qualified, "CPU"):
        raise NotImplementedError(
            f"{qualified} has no implementation for the neuron device: PyTorch provides it only for other "
            "accelerators (CUDA, cuDNN, MIOpen, MPS...). Call the portable operator instead (for example "
            "torch.nn.functional.dropout rather than torch._fused_dropout, "
            "torch.nn.functional.scaled_dot_product_attention rather than a backend-specific attention kernel).")


def _warn_fallback(name: str) -> None:
    tracking.warn_once(f"fallback:{name}", f"Operator '{name}' executed via CPU fallback (inputs copied to the "
                       "host and results back); this is slow on Trainium. torch_neuronx.get_fallback_ops() "
                       "lists every op that fell back.")


def _called_by_tensor_printing() -> bool:
    """Printing a tensor widens it to float64 internally; that is not the user's 64-bit compute."""
    try:
        frame = sys._getframe(2)
    except ValueError:  # called with a shallow stack: from the autograd engine's device thread, say
        return False
    while frame is not None:
        if frame.f_code.co_filename.endswith("_tensor_str.py"):
            return True
        frame = frame.f_back
    return False


SIXTY_FOUR_BIT_WARNINGS = {
    torch.float64: ("float64", "float64 tensors are computed in float32 on Neuron (the tensors keep dtype float64, "
                    "with float32 precision and range). Use float32 where possible."),
    torch.int64: ("int64", "int64 tensors are computed in int32 on Neuron (the tensors keep dtype int64; values "
                  "outside the int32 range wrap around). Use int32 where possible."),
}


def _sixty_four_bit_dtypes(args, kwargs) -> frozenset:
    return frozenset(t.dtype for t in arguments.neuron_tensors(args, kwargs) if t.dtype in SIXTY_FOUR_BIT_WARNINGS)


def _warn_64bit(dtypes: frozenset) -> None:
    pending = {SIXTY_FOUR_BIT_WARNINGS[d] for d in dtypes if not tracking.warned(SIXTY_FOUR_BIT_WARNINGS[d][0])}
    if pending and not _called_by_tensor_printing():
        for key, message in pending:
            tracking.warn_once(key, message)


def run_python(executable_id, op, args, kwargs):
    e = tracking.executable(executable_id)
    if e.kind == tracking.FALLBACK:
        call_sites.record(call_sites.CPU_FALLBACK, e.name)
        _warn_fallback(e.name)
        return fallback.run_on_host(op, args, kwargs)
    if e.op in RUN_ON_HOST:
        return _run_on_aliases(RUN_ON_HOST[e.op], args, kwargs)
    if executable_id in _composite_kernel_runs:
        return whole_ops.composite_kernel(op, args, kwargs)
    fix = _host_kernel_fixes.get(executable_id)
    if fix is not None:
        return fallback.run_on_host(op, args, kwargs, kernel=functools.partial(fix.kernel, op))
    if not _called_by_tensor_printing():
        call_sites.record(call_sites.SIXTY_FOUR_BIT, e.name)
    _warn_64bit(_wide_dtypes[executable_id])
    return downcast.run_narrowed(op, args, kwargs, _expected_dtypes.get(executable_id))


def _run_on_aliases(kernel, args, kwargs):
    """An op whose device kernel is Python (its record's on_host): `kernel` computes on zero-copy host aliases of the
    device tensors, so what it updates in place lands in device memory, and its results become device tensors
    without a copy, as on the C++ device route (no transfer, nothing else tracked)."""
    device = arguments.neuron_tensors(args, kwargs)[0].device
    aliased_storages = set()

    def alias(x):
        if not (isinstance(x, torch.Tensor) and x.device.type == "neuron"):
            return x
        aliased_storages.add(x.untyped_storage().data_ptr())
        return _C.cpu_alias(x)

    def to_device(t):  # a result over an argument's bytes (the kernel returned its input) gets bytes of its own
        return _C.adopt(t.clone() if t.untyped_storage().data_ptr() in aliased_storages else t, device.index)

    host_args, host_kwargs = arguments.map_arguments(alias, args, kwargs)
    return arguments.map_tensors(to_device, kernel(*host_args, **host_kwargs))


def on_device_failure(executable_id, op, args, kwargs, message):
    """The device execution of a native op raised: TorchNeuron retries it on the host unless told not to."""
    e = tracking.executable(executable_id)
    name = e.name
    if e.kind == tracking.FALLBACK:  # a queued fallback: the host's own error
        return fallback.run_on_host(op, args, kwargs)
    if read(ONLY_UNIMPLEMENTED_VAR):
        raise _fallback_disabled(name, "localneuron device executor",
                                 f"{message}. Args: [{_describe(args, {})}]. Kwargs: {sorted(kwargs)}")
    try:
        result = fallback.run_on_host(op, args, kwargs)  # a user error raises here, as it would on the host
    except IndexError as error:  # an error TorchNeuron's kernel raises as another type too (lowering_errors)
        raised = kernel_error(e.op, error)
        if raised is error:
            raise
        raise raised.with_traceback(error.__traceback__) from None
    call_sites.record(call_sites.CPU_FALLBACK, name)
    tracking.mark_fallback(executable_id)
    _warn_fallback(name)
    return result


def on_kernel_refusal(name: str, reason: str) -> None:
    """A kernel of the device's own met a call TorchNeuron's Neuron implementation refuses (csrc/aten/kernels.cpp:
    a channels-last _to_copy): unless told not to, TorchNeuron runs it as a CPU fallback, so it is warned, listed and
    attributed as one; the kernel then computes what the host would."""
    if read(ONLY_UNIMPLEMENTED_VAR):
        raise _fallback_disabled(name, "localneuron device kernel", reason)
    tracking.count_refused_call(name)
    call_sites.record(call_sites.CPU_FALLBACK, name)
    _warn_fallback(name)


def on_strided_write(name: str, overload: str) -> None:
    """A native op writes (in place or out=) into a tensor that is not contiguous, such as a column `m[:, 3].add_(2)`.
    TorchNeuron's kernel launch refuses non-contiguous tensors (the source snapshot's PrepareKernelTensors: its
    prologues make inputs contiguous, never a written destination), so with its CPU fallback disabled that is the
    error. Otherwise localneuron runs the write natively: whether TorchNeuron's fallback writes the result back into
    the view is not settled by its sources (docs/limitations.md)."""
    if read(ONLY_UNIMPLEMENTED_VAR):
        raise _fallback_disabled(tracking.tracked_name(name, overload), "localneuron device executor",
                                 "Cannot process non-contiguous tensors: the "
                                 "tensor it writes is not contiguous (write into a contiguous tensor, then copy_ it "
                                 "into the view)")


def _fallback_disabled(name: str, implementation: str, details: str) -> RuntimeError:
    """TorchNeuron's error for a Neuron implementation that failed while its CPU fallback is disabled."""
    return RuntimeError(f"CPU fallback disabled because {ONLY_UNIMPLEMENTED_VAR}=1. Operation {name} failed to execute "
                        f"on Neuron (last implementation: {implementation}). Details: {details}")


def held_error_type(op_name: str, kernel_error_type: str, message: str):
    """The class the error `message` of type `kernel_error_type` ("IndexError"), which the kernel of `op_name`
    ("aten::index") raised, is raised as, by the op record's kernel_error rule; None: the type it has (at the call)
    or RuntimeError (held: csrc/queue/held_errors.cpp asks for the first failure a synchronisation point raises)."""
    record = OPS.get(op_name)
    rule = record.kernel_error if record is not None else None
    return rule(kernel_error_type, message) if rule is not None else None


def kernel_error(op_name: str, error: BaseException) -> BaseException:
    """The error raised at the call for `error`, which the op's kernel raised: as the class held_error_type() gives
    (same message), else `error` itself."""
    if not isinstance(error, IndexError) or isinstance(error, RuntimeError):
        return error  # the only rule is for an IndexError
    cls = held_error_type(op_name, "IndexError", str(error))
    return cls(str(error)) if cls is not None else error
