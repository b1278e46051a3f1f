"""Records what a model does on fake `neuron` tensors (shapes and dtypes, no memory; PyTorch takes the
same device-specific paths as for real neuron tensors, e.g. fused dropout), op by op, with the device's own routing decision for
each op (localneuron.ops.policy.classify: support table, CPU fallbacks, 64-bit policy), the
collectives it would issue, the tensors autograd saves, and the bytes alive at each point (an
allocator without caching, counting each storage's bytes: what max_memory_allocated measures). Each op also
records what the device issues for it run eagerly (ISSUED): the executable the device prices with
costmodel/work.price_op, a copy within HBM, nothing, or the in-place op a creation op's kernel runs on its result."""
import contextlib
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten
from torch.multiprocessing.reductions import StorageWeakRef

from localneuron.costmodel import engines
from localneuron.costmodel.ops import EXECUTABLE, GraphOp
from localneuron.ops import tracking
from localneuron.ops.arguments import bind, mutated_argument_names, per_schema, positions
from localneuron.ops.op_records import names_with
from localneuron.ops.policy import classify

_active: list["Trace"] = []

# Ops the device runs eagerly without an executable of their own: op -> COPY, NOTHING or the in-place op the device
# runs on the output (aten::zeros: aten::zero_), from the op records' `issued` field (op_records.py says why each;
# costmodel/ops.eager_issues prices it); every other op issues its executable.
ISSUED = names_with("issued")

# What an op reads and writes, the one rule (_operands): every argument it writes is one of its results, though it
# returns none (the optimizers' in-place _foreach_ ops), so a compiled graph writes it to HBM once. It reads that
# argument too (mul_ and _foreach_addcdiv_ compute from it) unless it overwrites it whole: an out= destination, and
# the written arguments of the ops whose records say `overwrites` (a copy's destination, a fill's target), as a
# graph does not read from HBM what it only overwrites (bf16 weights refreshed from fp32 master copies).
OVERWRITE_WHOLE = frozenset(names_with("overwrites"))


@dataclass
class Phase:
    name: str
    ops: list = field(default_factory=list)            # GraphOp
    collectives: list = field(default_factory=list)    # (kind, bytes)


class Trace(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.phases: list[Phase] = [Phase("forward")]
        self.kinds: Counter = Counter()        # routing kind -> calls
        self.fallback_ops: Counter = Counter()
        self.computed_in_32bit: Counter = Counter()
        self.saved: dict[int, int] = {}        # tensor key -> bytes, saved for the backward
        self._storages: dict[int, tuple] = {}  # storage cdata -> (weak ref, key, bytes)
        self._next_key = 0
        self.live_bytes = 0
        self.peak_bytes = 0
        # storages that are a dense copy of a broadcast (an expand's stride-0 dims made real): key -> (the key of the
        # storage broadcast, how many copies of each of its elements), so attention reads the keys and values as
        # their own (fewer) heads (_grouped_attention)
        self.repeats: dict[int, tuple[int, int]] = {}

    # --- tensors, identified by storage, with their lifetime ----------------------------------
    def key(self, t: torch.Tensor) -> int:
        storage = t.untyped_storage()
        cdata = storage._cdata
        entry = self._storages.get(cdata)
        if entry is None or entry[0].expired():
            if entry is not None:
                self.live_bytes -= entry[2]
            size = storage.nbytes()
            entry = (StorageWeakRef(storage), self._next_key, size)
            self._next_key += 1
            self._storages[cdata] = entry
            if self.live_bytes + size > self.peak_bytes:
                self.release_dead()   # a new peak only counts what is still alive (a scan only then)
            self.live_bytes += size
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
        return entry[1]

    def resized(self, storage, nbytes: int) -> None:
        """A storage resized in place (FSDP2 frees an unsharded parameter by resizing its storage to 0 and
        resizes it back to all-gather into it): live bytes follow."""
        entry = self._storages.get(storage._cdata)
        if entry is not None and not entry[0].expired():
            self.live_bytes += nbytes - entry[2]
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            self._storages[storage._cdata] = (entry[0], entry[1], nbytes)

    def release_dead(self):
        for cdata in [c for c, (ref, _, _) in self._storages.items() if ref.expired()]:
            self.live_bytes -= self._storages.pop(cdata)[2]

    def track(self, tensors) -> None:
        """Counts tensors that exist before the traced code runs (parameters, inputs)."""
        for t in tensors:
            self.key(t)

    # --- phases and markers ------------------------------------------------------------------
    @property
    def phase(self) -> Phase:
        return self.phases[-1]

    def begin(self, name: str) -> None:
        self.phases.append(Phase(name))

    def ops(self, name: str) -> list:
        return [op for p in self.phases if p.name == name for op in p.ops]

    def collectives(self, name: str) -> list:
        return [c for p in self.phases if p.name == name for c in p.collectives]

    def collectives_of_last(self, name: str) -> list:
        """The collectives of the last phase called `name` (a repeated step's steady state)."""
        return list(next(p for p in reversed(self.phases) if p.name == name).collectives)

    @contextlib.contextmanager
    def saving(self):
        """Records the tensors autograd keeps for the backward (activation memory)."""
        def pack(t):
            if isinstance(t, torch.Tensor) and not isinstance(t, torch.nn.Parameter):
                self.saved[self.key(t)] = t.untyped_storage().nbytes()
            return t
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            yield

    def __enter__(self):
        _active.append(self)
        return super().__enter__()

    def __exit__(self, *exc):
        _active.remove(self)
        return super().__exit__(*exc)

    # --- ops -----------------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.namespace == "prim":   # tensor metadata queries, not ops
            return func(*args, **kwargs)
        kind, _ = classify(func, args, kwargs)
        on_host = kind == tracking.FALLBACK
        inputs, written = _operands(func, args, kwargs, on_host)
        input_keys = [self.key(t) for t in inputs]
        out = func(*args, **kwargs)
        self.kinds[kind] += 1
        if kind == tracking.VIEW:
            return out
        name = func._schema.name
        if kind == tracking.FALLBACK:
            self.fallback_ops[tracking.tracked_name(name, func._schema.overload_name)] += 1
        elif kind == tracking.NATIVE_32BIT:
            self.computed_in_32bit[tracking.tracked_name(name, func._schema.overload_name)] += 1
        returned = _tensors(out)
        outputs = returned + [t for t in written if not any(t is r for r in returned)]
        self.record(name, inputs, outputs, on_host=on_host, input_keys=input_keys)
        if inputs and len(returned) == 1 and isinstance(engines.rule(name), engines.Movement):
            copies = _broadcast_copies(inputs[0])
            if copies > 1 and returned[0].numel() == inputs[0].numel():   # the broadcast made dense
                self.repeats[self.key(returned[0])] = (input_keys[0], copies)
        return out

    def record(self, name: str, inputs: list, outputs: list, on_host: bool = False, input_keys=None) -> None:
        """One op of the trace, priced by the rule its record gives `name`."""
        input_keys = input_keys if input_keys is not None else [self.key(t) for t in inputs]
        output_keys = [self.key(t) for t in outputs]
        operands = [list(zip(input_keys, map(_shape_only, inputs))), list(zip(output_keys, map(_shape_only, outputs)))]
        rule = engines.rule(name)
        if isinstance(rule, engines.Attention):
            self._grouped_attention(rule.passes, inputs, *operands)
        self.phase.ops.append(GraphOp(name, tuple(operands[0]), tuple(operands[1]), on_host=on_host,
                                      issued=ISSUED.get(name, EXECUTABLE)))

    def _grouped_attention(self, passes: int, inputs: list, operands: list, results: list) -> None:
        """Grouped-query attention whose keys and values reach the op repeated to every query head (Transformers'
        repeat_kv: an expand of [b, kv, 1, s, d] to [b, kv, g, s, d] copied into [b, h, s, d], as its sdpa and
        eager paths do whenever SDPA's enable_gqa is not used, e.g. with an attention mask; or an expand passed
        as it is, stride 0 along the heads) is recorded as the fused op the device runs on the model's kv heads:
        keys and values of h / g heads, read from the storage repeated (the KV cache at decode), and, in the
        backward, their gradients at those heads, as the NKI Library's kernels take them
        (costmodel/engines._attention_gemms prices the group from the operands, as for --hf-config).
        The op's operands (key, shape-only tensor) are changed in place; the query and everything else are kept."""
        for i in (passes, passes + 1):   # the key and the value among the op's inputs
            if i >= len(inputs) or inputs[i].dim() < 3 or inputs[passes - 1].dim() < 3:
                continue
            t, heads = inputs[i], inputs[i].shape[-3]
            if heads != inputs[passes - 1].shape[-3]:
                continue   # already grouped (enable_gqa), or not heads at all
            source, copies = operands[i][0], 1
            if heads > 1 and t.stride(-3) == 0:
                copies = heads
            elif operands[i][0] in self.repeats and t.is_contiguous():
                source, copies = self.repeats[operands[i][0]]
            if copies <= 1 or heads % copies:
                continue
            shape = (*t.shape[:-3], heads // copies, *t.shape[-2:])
            operands[i] = (source, torch.empty(shape, dtype=t.dtype, device="meta"))
            gradient = i - passes + 1   # the backward's results: dQ, dK, dV
            if passes == 2 and gradient < len(results) and tuple(results[gradient][1].shape) == tuple(t.shape):
                results[gradient] = (results[gradient][0], torch.empty(shape, dtype=results[gradient][1].dtype,
                                                                         device="meta"))


def _tensors(value) -> list:
    return [t for t in tree_flatten(value)[0] if isinstance(t, torch.Tensor)]


@per_schema
def _overwritten_argument_names(schema) -> frozenset:
    """The arguments the op writes without reading them (OVERWRITE_WHOLE says which)."""
    whole = mutated_argument_names(schema) if schema.name in OVERWRITE_WHOLE else ()
    return frozenset(whole) | {a.name for a in schema.arguments if a.is_out}


def _operands(func, args, kwargs, on_host: bool) -> tuple[list, list]:
    """(the tensors the op reads, in argument order; those it writes), from its schema, by OVERWRITE_WHOLE's rule. A
    CPU fallback copies every argument to the host, so there each is read."""
    schema = func._schema
    bound = bind(schema, args, kwargs)
    written = _tensors([bound[name] for name in mutated_argument_names(schema) if name in bound])
    skipped = frozenset() if on_host else _overwritten_argument_names(schema)
    read = ([a for name, a in zip(positions(schema), args) if name not in skipped],
            {name: v for name, v in kwargs.items() if name not in skipped})
    return _tensors(read), written


def _broadcast_copies(t: torch.Tensor) -> int:
    """How many times each element of `t`'s storage appears in `t`: the sizes of its stride-0 dims multiplied (an
    expand's broadcast dims; 1 for a tensor without them)."""
    copies = 1
    for size, stride in zip(t.shape, t.stride()):
        if stride == 0:
            copies *= size
    return copies


def _shape_only(t: torch.Tensor) -> torch.Tensor:
    """A storage-less stand-in with the same shape and dtype, so the record keeps no tensor alive."""
    return torch.empty(t.shape, dtype=t.dtype, device="meta")


@contextlib.contextmanager
def fake_device():
    """Tensors and modules made inside are fake tensors on `neuron`; tracing happens inside too."""
    with FakeTensorMode(allow_non_fake_inputs=False):
        yield


def cast(module: torch.nn.Module, dtype: torch.dtype) -> torch.nn.Module:
    """module.to(dtype) for fake parameters (Module.to would try to swap the tensors, which fake
    tensors refuse). Tensors that belong to another fake mode (copy.deepcopy of a layer, as
    nn.TransformerEncoder does, copies the mode too) are remade in the active one."""
    mode = torch._guards.detect_fake_mode()

    def remade(t):
        if isinstance(t, FakeTensor) and t.fake_mode is not mode:   # only its metadata may be read
            t = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
        return t.detach().to(dtype) if t.is_floating_point() and t.dtype != dtype else t

    for m in module.modules():
        for name, p in m._parameters.items():
            if p is not None and (fresh := remade(p)) is not p:
                m._parameters[name] = torch.nn.Parameter(fresh, requires_grad=p.requires_grad)
        for name, b in m._buffers.items():
            if b is not None:
                m._buffers[name] = remade(b)
    return module


def record_kernel(name: str, inputs: list, outputs: list) -> None:
    """A kernel the model runs whole (no aten op stands for it: costmodel/engines.py's _KERNELS prices it by `name`),
    recorded into the trace under way with its operands."""
    if _active:
        _active[-1].record(name, inputs, outputs)


def record_collective(kind: str, nbytes: int) -> None:
    if _active:
        _active[-1].phase.collectives.append((kind, nbytes))
