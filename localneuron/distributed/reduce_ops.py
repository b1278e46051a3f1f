"""Reduce ops on the `neuron` backend, given a transport (Gloo) that knows SUM, PRODUCT, MIN, MAX, AVG
and the bitwise ops, but not PREMUL_SUM.

PREMUL_SUM(f) is SUM of f·x (FSDP2 issues it when a gradient divide factor is set); each rank scales its
own contribution on the device and the transport sums. AVG of integers has no meaning on any backend:
it is refused up front with a message, rather than by a cast error from inside the transport.
"""
import torch
import torch.distributed as dist

RedOpType = dist.ReduceOp.RedOpType


def premul_factor(op, tensors):
    """The factor of a PREMUL_SUM op (a number or a tensor), None for any other op; refuses AVG of integers."""
    kind = op.op if isinstance(op, dist.ReduceOp) else op
    if kind == RedOpType.PREMUL_SUM:
        return op.factor
    if kind == RedOpType.AVG:
        for t in tensors:
            if not (t.is_floating_point() or t.is_complex()):
                raise ValueError(f"ReduceOp.AVG needs floating-point tensors, got {t.dtype}; "
                                 "reduce with SUM and divide instead.")
    return None


def as_sum(opts):
    """A copy of collective options `opts` with the reduce op replaced by SUM (the caller's options stay as
    they were: they may be shared with C++)."""
    lowered = type(opts)()
    for name in ("timeout", "asyncOp", "rootRank", "rootTensor"):
        if hasattr(opts, name):
            setattr(lowered, name, getattr(opts, name))
    lowered.reduceOp = dist.ReduceOp.SUM
    return lowered


def scaled(tensors: list[torch.Tensor], factor) -> list[torch.Tensor]:
    return [t * factor for t in tensors]
