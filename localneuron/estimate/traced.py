"""A module traced once on fake neuron tensors and priced as compiled graphs: its forward (and, when
training, its backward) on one logical core, the collectives it issues, and its memory."""
from collections import Counter
from dataclasses import dataclass, field

import torch
from torch.utils._pytree import tree_flatten

from localneuron.costmodel import ops as cost_ops
from localneuron.costmodel.engines import op_work
from localneuron.costmodel.hardware import Chip
from localneuron.costmodel.time import Breakdown
from localneuron.estimate.trace import Trace


@dataclass
class TracedModule:
    forward: Breakdown
    backward: Breakdown
    eager_forward: Breakdown          # the same ops launched one by one (what compiling saves)
    collectives: dict                 # phase -> [(kind, bytes)]
    parameter_count: int
    parameter_bytes: int
    saved_bytes: int                  # activations kept for the backward
    workspace_bytes: int              # transient peak beyond parameters, constants and saved activations
    fallback_ops: Counter = field(default_factory=Counter)
    computed_in_32bit: Counter = field(default_factory=Counter)
    flops: float = 0.0


def kv_cache_descriptor_bytes(cache: torch.Tensor) -> int:
    """A decode step appends one token to the cache, so the cache sits token by token in HBM: one
    token's keys (or values) of every local head and sequence, (batch, heads, tokens, head_dim) here,
    is the longest contiguous run a read of it can put in one DMA descriptor."""
    return cache.numel() * cache.element_size() // max(1, cache.shape[-2])


def trace_module(chip: Chip, module: torch.nn.Module, inputs: tuple, constants: tuple = (),
                 train: bool = False, kv_cache: tuple = ()) -> TracedModule:
    """`inputs` are the activations the module consumes (their gradients are wanted when training);
    `constants` are shared tensors such as masks and rotary tables, not activations of this module;
    `kv_cache` those of the constants that are a decode cache (read with small descriptors)."""
    module.train(train)
    parameters = list(module.parameters())
    constant_tensors = [t for t in tree_flatten(constants)[0] if isinstance(t, torch.Tensor)]
    trace = Trace()
    with trace:
        trace.track(parameters + [t for t in inputs if isinstance(t, torch.Tensor)] + constant_tensors)
        fixed = {trace.key(t) for t in parameters + constant_tensors}
        cache_descriptors = {trace.key(t): kv_cache_descriptor_bytes(t) for t in kv_cache if t.dim() >= 3}
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
    forward = cost_ops.graph(chip, forward_ops, set(forward_out) | set(saved), cache_descriptors)
    eager = cost_ops.eager_sequence(chip, forward_ops)
    backward = Breakdown()
    if train:
        backward_ops = trace.ops("backward")
        gradients = {trace.key(p.grad) for p in parameters if p.grad is not None}
        gradients |= {trace.key(t.grad) for t in inputs if isinstance(t, torch.Tensor) and t.grad is not None}
        backward = cost_ops.graph(chip, backward_ops, gradients)
    flops = sum(op_work(chip, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs]).flops
                for op in forward_ops)
    parameter_bytes = sum(p.numel() * p.element_size() for p in parameters)
    constant_bytes = sum(c.numel() * c.element_size() for c in constant_tensors)
    saved_bytes = sum(saved.values())
    return TracedModule(
        forward=forward, backward=backward, eager_forward=eager,
        collectives={p.name: list(p.collectives) for p in trace.phases},
        parameter_count=sum(p.numel() for p in parameters), parameter_bytes=parameter_bytes,
        saved_bytes=saved_bytes,
        workspace_bytes=max(0, trace.peak_bytes - parameter_bytes - constant_bytes - saved_bytes),
        fallback_ops=trace.fallback_ops, computed_in_32bit=trace.computed_in_32bit, flops=flops)


EMPTY = TracedModule(Breakdown(), Breakdown(), Breakdown(), {}, 0, 0, 0, 0)


def difference(more: TracedModule, fewer: TracedModule) -> TracedModule:
    """What `more` has beyond `fewer`: the same model traced with one more layer gives the layer. The
    transient workspace is a peak, not a sum: the layer keeps the larger one."""
    def minus(a: Counter, b: Counter) -> Counter:
        return Counter(a) - Counter(b)
    phases = set(more.collectives) | set(fewer.collectives)
    calls = {p: list(minus(Counter(more.collectives.get(p, [])), Counter(fewer.collectives.get(p, []))).elements())
             for p in phases}
    return TracedModule(
        forward=more.forward + fewer.forward.scaled(-1), backward=more.backward + fewer.backward.scaled(-1),
        eager_forward=more.eager_forward + fewer.eager_forward.scaled(-1), collectives=calls,
        parameter_count=more.parameter_count - fewer.parameter_count,
        parameter_bytes=more.parameter_bytes - fewer.parameter_bytes,
        saved_bytes=more.saved_bytes - fewer.saved_bytes,
        workspace_bytes=max(more.workspace_bytes, fewer.workspace_bytes),
        fallback_ops=minus(more.fallback_ops, fewer.fallback_ops),
        computed_in_32bit=minus(more.computed_in_32bit, fewer.computed_in_32bit), flops=more.flops - fewer.flops)


def mean(parts: list[tuple[TracedModule, int]]) -> TracedModule:
    """The average of layers of different kinds, each (traced layer, how many the model has)."""
    total = sum(n for _, n in parts)

    def average(get):
        return sum(get(t) * n for t, n in parts) / total

    def breakdown(get):
        out = Breakdown()
        for t, n in parts:
            out += get(t).scaled(n / total)
        return out
    calls = {}
    for t, n in parts:   # every layer's collectives, weighted by calls per layer on average
        for phase, listed in t.collectives.items():
            calls.setdefault(phase, []).extend((kind, nbytes * n / total) for kind, nbytes in listed)
    fallback, narrowed = Counter(), Counter()
    for t, _ in parts:
        fallback.update(t.fallback_ops)
        narrowed.update(t.computed_in_32bit)
    return TracedModule(
        forward=breakdown(lambda t: t.forward), backward=breakdown(lambda t: t.backward),
        eager_forward=breakdown(lambda t: t.eager_forward), collectives=calls,
        parameter_count=round(average(lambda t: t.parameter_count)),
        parameter_bytes=round(average(lambda t: t.parameter_bytes)),
        saved_bytes=round(average(lambda t: t.saved_bytes)),
        workspace_bytes=max(t.workspace_bytes for t, _ in parts), fallback_ops=fallback,
        computed_in_32bit=narrowed, flops=average(lambda t: t.flops))
