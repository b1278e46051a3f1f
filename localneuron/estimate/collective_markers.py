"""Megatron-style tensor-parallel communication inside a traced layer shard. The shard's tensors are
fake tensors, so nothing moves: each marker records the collective (kind and bytes) on the active
trace and returns a tensor of the shape the real collective would, with the matching backward."""
import torch

from localneuron.estimate import trace


def _record(kind: str, tensor: torch.Tensor) -> None:
    trace.record_collective(kind, tensor.numel() * tensor.element_size())


class _AllReduceForward(torch.autograd.Function):
    """Row-parallel output: all-reduce forward, identity backward."""
    @staticmethod
    def forward(ctx, x):
        _record("all_reduce", x)
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        return grad


class _AllReduceBackward(torch.autograd.Function):
    """Column-parallel input: identity forward, all-reduce of the input gradient backward."""
    @staticmethod
    def forward(ctx, x):
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        _record("all_reduce", grad)
        return grad.clone()


class _GatherSequence(torch.autograd.Function):
    """Sequence parallel: all-gather along the sequence forward, reduce-scatter backward."""
    @staticmethod
    def forward(ctx, x, parts):
        ctx.parts = parts
        full = x.new_empty((x.shape[0], x.shape[1] * parts, *x.shape[2:]))
        _record("all_gather", full)
        return full

    @staticmethod
    def backward(ctx, grad):
        _record("reduce_scatter", grad)
        return grad.new_empty((grad.shape[0], grad.shape[1] // ctx.parts, *grad.shape[2:])), None


class _ScatterSequence(torch.autograd.Function):
    """Sequence parallel: reduce-scatter along the sequence forward, all-gather backward."""
    @staticmethod
    def forward(ctx, x, parts):
        ctx.parts = parts
        _record("reduce_scatter", x)
        return x.new_empty((x.shape[0], x.shape[1] // parts, *x.shape[2:]))

    @staticmethod
    def backward(ctx, grad):
        full = grad.new_empty((grad.shape[0], grad.shape[1] * ctx.parts, *grad.shape[2:]))
        _record("all_gather", full)
        return full, None


def enter_parallel_region(x: torch.Tensor, tp: int, sequence_parallel: bool) -> torch.Tensor:
    if tp == 1:
        return x
    return _GatherSequence.apply(x, tp) if sequence_parallel else _AllReduceBackward.apply(x)


def leave_parallel_region(x: torch.Tensor, tp: int, sequence_parallel: bool) -> torch.Tensor:
    if tp == 1:
        return x
    return _ScatterSequence.apply(x, tp) if sequence_parallel else _AllReduceForward.apply(x)


class _GatheredLinear(torch.autograd.Function):
    """Megatron's sequence-parallel column-parallel linear: gather the sequence, multiply; keep only
    the local shard for the backward and gather it again there (saves tp-1 shards of activations)."""
    @staticmethod
    def forward(ctx, x, weight, bias, parts):
        ctx.parts = parts
        ctx.save_for_backward(x, weight)
        ctx.has_bias = bias is not None
        full = x.new_empty((x.shape[0], x.shape[1] * parts, *x.shape[2:]))
        _record("all_gather", full)
        return torch.nn.functional.linear(full, weight, bias)

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        full = x.new_empty((x.shape[0], x.shape[1] * ctx.parts, *x.shape[2:]))
        _record("all_gather", full)
        grad_full = grad.matmul(weight)
        _record("reduce_scatter", grad_full)
        grad_x = grad_full.new_empty(x.shape)
        grad_weight = grad.flatten(0, -2).t().matmul(full.flatten(0, -2))
        grad_bias = grad.flatten(0, -2).sum(0) if ctx.has_bias else None
        return grad_x, grad_weight, grad_bias, None


# Megatron's vocabulary-parallel cross entropy all-reduces three fp32 values per token over the tensor-parallel
# ranks: the largest logit, the target's logit (on the rank holding it) and the sum of the exponentials. Its backward
# is local to each rank's slice.
VOCABULARY_PARALLEL_LOSS_ALL_REDUCES = 3


def vocabulary_parallel_loss(tokens: int, tp: int) -> None:
    """Records the all-reduces of a cross entropy over `tokens` tokens whose vocabulary is split over `tp` ranks
    (small, but each pays a collective's latency)."""
    if tp > 1:
        for _ in range(VOCABULARY_PARALLEL_LOSS_ALL_REDUCES):
            trace.record_collective("all_reduce", tokens * torch.float32.itemsize)


def column_parallel(x: torch.Tensor, linear: torch.nn.Linear, tp: int, sequence_parallel: bool) -> torch.Tensor:
    """A column-parallel linear fed by the replicated (or, with sequence parallelism, gathered) input."""
    if tp > 1 and sequence_parallel:
        return _GatheredLinear.apply(x, linear.weight, linear.bias, tp)
    return linear(enter_parallel_region(x, tp, sequence_parallel))
