"""What ran where: one record per compiled executable, counts from the C++ executor, warnings once.

TorchNeuron's trackers (get_executed_ops / get_fallback_ops) hold unique op names; the portability
report also wants per-op call counts, which come from the executor's per-executable counters. Every
list and table of ops (the trackers, the fallback warnings and call sites, the portability report,
the per-op estimates of `localneuron estimate`) names an op by tracked_name().
"""
import threading
import warnings
from collections import Counter
from dataclasses import dataclass

from localneuron import _C
from localneuron.costmodel.work import DeviceWork
from localneuron.ops import support
from localneuron.ops.op_records import record
from localneuron.runtime import line_time
from localneuron.runtime.environment import read

NATIVE = "native"
NATIVE_32BIT = "native (64-bit computed in 32-bit)"
FALLBACK = "cpu_fallback"
VIEW = "view"


def tracked_name(op: str, overload: str) -> str:
    """The name TorchNeuron's trackers list an op call under: the dispatcher's operator name, "aten::name" for
    the default overload and "aten::name.overload" for any other (c10::OperatorName's own spelling).

    Why (TorchNeuron's test suite, tests/python_ops and tests/operations): its assertions name non-default
    overloads with the overload (aten::where.self, aten::sum.dim_IntList, aten::lerp.Scalar,
    aten::repeat_interleave.Tensor, aten::max.dim, aten::arange.start_out, out= calls as aten::cumsum.out), which
    only an overload-qualified tracker can satisfy, and default overloads by the bare name (aten::linear,
    aten::resize_, aten::empty_strided, aten::_local_scalar_dense). Its helpers accept "aten::add" for a call of
    add.Tensor because they also look for the short name ("add") inside each tracked name; its exact lookups
    (`op in get_executed_ops()`) are of ops with only a default overload (embedding_dense_backward).

    An op the device runs whole where TorchNeuron's composite kernel calls a kernel of another overload is listed
    under that overload, as TorchNeuron lists it (its record's tracked_as: torch.arange(0, 5, 1) is
    aten::arange.start_out, not aten::arange.start_step).
    """
    r = record(op, overload)
    if r is not None and r.tracked_as:
        return r.tracked_as
    return f"{op}.{overload}" if overload else op


@dataclass
class Executable:
    op: str          # "aten::add": the record and the cost rule are looked up by it
    overload: str    # "Tensor"
    kind: str
    listed: bool     # whether the support table names the op (False: assumed native)
    signature: str
    # what one call costs on the simulated target, priced at the first (None: a view, or a kernel of the device's
    # own, whose copies and host reads are priced where they are issued)
    work: DeviceWork | None
    estimated_compiled_seconds: float  # per call, were it part of a compiled graph

    @property
    def name(self) -> str:
        return tracked_name(self.op, self.overload)

    @property
    def estimated_seconds(self) -> float:
        return self.work.seconds if self.work is not None else 0.0


_lock = threading.Lock()
_executables: list[Executable] = []
_refused_calls: Counter = Counter()  # tracked name -> calls a device kernel ran as a CPU fallback (count_refused_call)
_warned: set[str] = set()


def register(executable: Executable) -> int:
    with _lock:
        _executables.append(executable)
        return len(_executables) - 1


def register_kernel_executables() -> None:
    """One executable per kernel of the device's own that TorchNeuron's trackers list (allocation, copies, metadata:
    csrc/executor/executor.h CountedKernel); C++ counts their calls as it counts an executable's."""
    ids = []
    for qualified in _C.counted_kernel_names():
        op, _, overload = qualified.partition(".")
        _, listed = support.rule_for(op, set())
        ids.append(register(Executable(op=op, overload=overload, kind=NATIVE, listed=listed, signature="",
                                       work=None, estimated_compiled_seconds=0.0)))
    _C.set_counted_kernel_executables(ids)


def executable(executable_id: int) -> Executable:
    return _executables[executable_id]


def mark_fallback(executable_id: int) -> None:
    """A device execution failed and the host ran the op instead: account it as a fallback from now on."""
    _executables[executable_id].kind = FALLBACK


def count_refused_call(name: str) -> None:
    """A call of a kernel of the device's own that TorchNeuron's Neuron implementation refuses, run as a CPU fallback
    (policy.on_kernel_refusal): listed with the fallbacks, as TorchNeuron lists it."""
    with _lock:
        _refused_calls[name] += 1


def fused_name(executable_ids) -> str:
    """The name a fused operator (an Adaptive Eager run that ran as one) is tracked under: its ops' tracked names, in
    order, joined by '|' ("aten::add.Tensor|aten::mm"), as TorchNeuron's trackers list a concatenated op."""
    return "|".join(_executables[i].name for i in executable_ids)


def op_counts() -> dict[str, Counter]:
    """kind -> Counter(tracked name -> calls) since the last clear_op_tracking().

    A fused operator (TORCH_NEURONX_ENABLE_CONCATENATION=1: csrc/fusion/fusion.h) is one op here, under
    fused_name(), and its ops' calls inside it are not counted again under their own names; so the trackers, the
    fallback list and the portability report's op table list it as TorchNeuron lists it. The ops' executables keep
    their own counts (_C.executable_calls()): estimated_device_seconds() and the cost model price each op's work.
    A run is counted as one op once it has run (ops are counted when issued): read after a synchronisation point, as
    TorchNeuron's tests read their trackers after .cpu(); before it, the run's ops are still listed one by one."""
    counts: dict[str, Counter] = {NATIVE: Counter(), NATIVE_32BIT: Counter(), FALLBACK: Counter(), VIEW: Counter()}
    for executable_id, calls in _C.executable_calls():
        e = _executables[executable_id]
        counts[e.kind][e.name] += calls
    for ids, runs in _C.fused_run_calls():
        for i in ids:
            e = _executables[i]
            left = counts[e.kind][e.name] - runs
            if left > 0:
                counts[e.kind][e.name] = left
            else:  # issued before the last clear_op_tracking(), ran after it
                counts[e.kind].pop(e.name, None)
        counts[NATIVE][fused_name(ids)] += runs
    with _lock:
        counts[FALLBACK].update(_refused_calls)
    return counts


def estimated_device_seconds() -> dict[str, float]:
    """tracked name -> estimated NeuronCore seconds over all its calls since the last clear_op_tracking()."""
    totals: Counter = Counter()
    for executable_id, calls in _C.executable_calls():
        e = _executables[executable_id]
        totals[e.name] += calls * e.estimated_seconds
    return dict(totals.most_common())


def estimated_compiled_seconds() -> float:
    """What the same eager calls would cost as parts of compiled graphs (no launches, intermediates in SBUF)."""
    return sum(calls * _executables[executable_id].estimated_compiled_seconds
               for executable_id, calls in _C.executable_calls())


def unlisted_native_ops() -> list[str]:
    ran = {op for kind in (NATIVE, NATIVE_32BIT) for op in op_counts()[kind]}
    return sorted({e.name for e in _executables if not e.listed and e.name in ran})


def get_executed_ops() -> list[str]:
    counts = op_counts()
    return sorted(set(counts[NATIVE]) | set(counts[NATIVE_32BIT]))


def get_fallback_ops() -> list[str]:
    return sorted(op_counts()[FALLBACK])


def clear_op_tracking() -> None:
    _C.reset_executable_calls()
    with _lock:
        _refused_calls.clear()
    _C.reset_fused_run_calls()
    line_time.clear()  # the time by source line covers the same calls as the per-op counts
    _C.reset_cross_device_errors()


def log_level() -> int:
    return read("TORCH_NEURONX_LOG_LEVEL")


def warned(key: str) -> bool:
    return key in _warned


def warn_once(key: str, message: str) -> None:
    if key in _warned:
        return
    _warned.add(key)
    if log_level() >= 1:
        warnings.warn(f"[Neuron] [WARNING] {message}", UserWarning, stacklevel=3)
