"""A module traced once on fake neuron tensors and priced as compiled graphs: its forward (and, when
training, its backward) on one logical core, the collectives it issues, and its memory.

The trace (the ops, with shapes) is kept and priced when asked, under the cost model's assumptions as
they stand then: the calibration refits an assumption and reprices without tracing again. Combinations
of traces (one layer as the difference of two- and one-layer models, the mean layer of a model mixing
kinds of layers) are linear, so they are priced from their parts."""
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten

from localneuron.costmodel import stacks
from localneuron.costmodel import ops as cost_ops
from localneuron.costmodel.engines import op_work
from localneuron.costmodel.hardware import Chip
from localneuron.costmodel.time import Breakdown
from localneuron.estimate.trace import Trace


# the dtype a matrix is stored in under each weight-only quantization format (--weights); what reading and
# widening it costs is the cost model's (costmodel/ops.py: graph(), widening())
STORED_DTYPES = {"int8": torch.int8, "fp8": torch.float8_e4m3fn}


@dataclass
class Graphs:
    """The ops of a traced forward and backward, what each must write to HBM, the graph inputs read
    with small DMA descriptors (a KV cache: key -> bytes) and those stored narrower than traced
    (weight-only quantized weights: key -> stored dtype)."""
    forward: list
    forward_outputs: set
    backward: list = field(default_factory=list)
    backward_outputs: set = field(default_factory=set)
    descriptors: dict = field(default_factory=dict)
    stored: dict = field(default_factory=dict)


@dataclass
class TracedModule:
    chip: Chip | None
    graphs: Graphs | None             # None: a combination of `parts`
    collectives: dict                 # phase -> [(kind, bytes)]
    parameter_count: int
    parameter_bytes: int
    saved_bytes: int                  # activations kept for the backward
    workspace_bytes: int              # transient peak beyond parameters, constants and saved activations
    fallback_ops: Counter = field(default_factory=Counter)
    computed_in_32bit: Counter = field(default_factory=Counter)
    flops: float = 0.0
    parts: tuple = ()                 # ((TracedModule, weight), ...): this one is their weighted sum
    _priced: dict = field(default_factory=dict, repr=False)   # what -> (efficiencies priced with, Breakdown)

    def _price(self, what: str) -> Breakdown:
        """"forward", "backward" or "eager_forward", as the fitted efficiencies now price it (a graph's price reads
        the target's figures and its stack's efficiencies, no assumption: the collectives are plan.py's to price);
        each priced when first asked, and again only when the efficiencies change."""
        key = stacks.values()
        cached = self._priced.get(what)
        if cached is not None and cached[0] == key:
            return cached[1]
        if self.graphs is None:
            priced = Breakdown()
            for part, weight in self.parts:
                priced = priced + part._price(what).scaled(weight)
        else:
            g, chip = self.graphs, self.chip
            if what == "forward":
                priced = cost_ops.graph(chip, g.forward, g.forward_outputs, g.descriptors, g.stored)
            elif what == "backward":
                priced = cost_ops.graph(chip, g.backward, g.backward_outputs, stored=g.stored) if g.backward \
                    else Breakdown()
            else:
                priced = cost_ops.eager_sequence(chip, g.forward, g.stored)
        self._priced[what] = (key, priced)
        return priced

    @property
    def forward(self) -> Breakdown:
        return self._price("forward")

    @property
    def backward(self) -> Breakdown:
        return self._price("backward")

    @property
    def eager_forward(self) -> Breakdown:
        """The forward's ops launched one by one (what compiling saves)."""
        return self._price("eager_forward")

    def scaled(self, factor: float) -> "TracedModule":
        """`factor` of this module (a pipeline stage's share of a whole model traced at once)."""
        return combine([(self, factor)], sizes=factor)


def kv_cache_descriptor_bytes(cache: torch.Tensor) -> int:
    """A decode step appends one token to the cache, so the cache sits token by token in HBM: one
    token's keys (or values) of every local head and sequence, (batch, heads, tokens, head_dim) here,
    is the longest contiguous run a read of it can put in one DMA descriptor."""
    return cache.numel() * cache.element_size() // max(1, cache.shape[-2])


def trace_module(chip: Chip, module: torch.nn.Module, inputs: tuple, constants: tuple = (),
                 train: bool = False, kv_cache: tuple = (), weights: str | None = None) -> TracedModule:
    """`inputs` are the activations the module consumes (their gradients are wanted when training);
    `constants` are shared tensors such as masks and rotary tables, not activations of this module;
    `kv_cache` those of the constants that are a decode cache (read with small descriptors);
    `weights`: the format the module's matrices are stored in (weight-only quantization, STORED_DTYPES)."""
    module.train(train)
    parameters = list(module.parameters())
    constant_tensors = [t for t in tree_flatten(constants)[0] if isinstance(t, torch.Tensor)]
    trace = Trace()
    with trace:
        trace.track(parameters + [t for t in inputs if isinstance(t, torch.Tensor)] + constant_tensors)
        fixed = {trace.key(t) for t in parameters + constant_tensors}
        cache_descriptors = {trace.key(t): kv_cache_descriptor_bytes(t) for t in kv_cache if t.dim() >= 3}
        matrices = [p for p in parameters if p.dim() >= 2 and not isinstance(_owner(module, p), torch.nn.Embedding)]
        stored_dtype = STORED_DTYPES[weights] if weights else None
        stored = {trace.key(p): stored_dtype for p in matrices} if stored_dtype else {}
        # inference runs without autograd: nothing is kept for a backward, so nothing extra reaches HBM
        with trace.saving(), torch.set_grad_enabled(train):
            out = module(*inputs, *constants)
        forward_out = [trace.key(t) for t in (out if isinstance(out, tuple) else (out,))]
        if train:
            trace.begin("backward")
            target = out[0] if isinstance(out, tuple) else out
            target.backward(torch.empty_like(target))
    saved = {k: b for k, b in trace.saved.items() if k not in fixed}
    forward_ops = trace.ops("forward")
    graphs = Graphs(forward_ops, set(forward_out) | set(saved), descriptors=cache_descriptors, stored=stored)
    if train:
        graphs.backward = trace.ops("backward")
        graphs.backward_outputs = {trace.key(p.grad) for p in parameters if p.grad is not None}
        graphs.backward_outputs |= {trace.key(t.grad) for t in inputs if isinstance(t, torch.Tensor) and t.grad is not None}
    flops = sum(op_work(chip, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs]).flops
                for op in forward_ops)
    parameter_bytes = sum(p.numel() * p.element_size() for p in parameters)
    if stored_dtype:
        parameter_bytes += sum(p.numel() * (stored_dtype.itemsize - p.element_size()) for p in matrices)
    constant_bytes = sum(c.numel() * c.element_size() for c in constant_tensors)
    saved_bytes = sum(saved.values())
    return TracedModule(
        chip=chip, graphs=graphs, collectives={p.name: list(p.collectives) for p in trace.phases},
        parameter_count=sum(p.numel() for p in parameters), parameter_bytes=parameter_bytes,
        saved_bytes=saved_bytes,
        workspace_bytes=max(0, trace.peak_bytes - sum(p.numel() * p.element_size() for p in parameters)
                            - constant_bytes - saved_bytes),
        fallback_ops=trace.fallback_ops, computed_in_32bit=trace.computed_in_32bit, flops=flops)


def _owner(module: torch.nn.Module, parameter: torch.nn.Parameter) -> torch.nn.Module | None:
    for m in module.modules():
        if any(p is parameter for p in m.parameters(recurse=False)):
            return m
    return None


EMPTY = TracedModule(None, None, {}, 0, 0, 0, 0)


def combine(parts: list[tuple[TracedModule, float]], sizes: float | None = None) -> TracedModule:
    """The weighted sum of traced modules (time, FLOPs and collective calls; sizes too, or, when
    `sizes` is given, the first part's sizes times it)."""
    def total(get):
        return sum(get(t) * w for t, w in parts)
    calls = {}
    for t, w in parts:
        for phase, listed in t.collectives.items():
            calls.setdefault(phase, []).extend((kind, nbytes * w) for kind, nbytes in listed)
    for phase, listed in calls.items():   # calls of opposite weights (a difference) cancel
        net = Counter()
        for kind, nbytes in listed:
            net[(kind, nbytes if nbytes >= 0 else -nbytes)] += 1 if nbytes >= 0 else -1
        calls[phase] = [key for key, n in net.items() for _ in range(max(0, n))]
    fallback, narrowed = Counter(), Counter()
    for t, w in parts:
        if w > 0:
            fallback.update(t.fallback_ops)
            narrowed.update(t.computed_in_32bit)

    def size(get):
        return round(get(parts[0][0]) * sizes) if sizes is not None else round(total(get))
    return TracedModule(
        chip=parts[0][0].chip, graphs=None, parts=tuple(parts), collectives=calls,
        parameter_count=size(lambda t: t.parameter_count), parameter_bytes=size(lambda t: t.parameter_bytes),
        saved_bytes=size(lambda t: t.saved_bytes), workspace_bytes=max(t.workspace_bytes for t, _ in parts),
        fallback_ops=fallback, computed_in_32bit=narrowed, flops=total(lambda t: t.flops))


def difference(more: TracedModule, fewer: TracedModule) -> TracedModule:
    """What `more` has beyond `fewer`: the same model traced with one more layer gives the layer. The
    transient workspace is a peak, not a sum: the layer keeps the larger one."""
    layer = combine([(more, 1.0), (fewer, -1.0)])
    layer.fallback_ops = Counter(more.fallback_ops) - Counter(fewer.fallback_ops)
    layer.computed_in_32bit = Counter(more.computed_in_32bit) - Counter(fewer.computed_in_32bit)
    return layer


def mean(parts: list[tuple[TracedModule, int]]) -> TracedModule:
    """The average of layers of different kinds, each (traced layer, how many the model has)."""
    count = sum(n for _, n in parts)
    return combine([(t, n / count) for t, n in parts])
