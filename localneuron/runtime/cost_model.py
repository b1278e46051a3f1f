"""Estimated NeuronCore time of one executable: a roofline over the target's published rates.

An estimate, labelled as one wherever it is shown: max(compute / engine rate, bytes / HBM bandwidth)
plus the runtime's launch cost; a CPU fallback instead pays the host link both ways. Matmul-like ops
run on the TensorE (bf16/fp16 at its dense peak, fp32 at a quarter of it), everything else on the
VectorE at one operation per element.
"""
import math

import torch

from localneuron.runtime.targets import Target

LOW_PRECISION = (torch.bfloat16, torch.float16, torch.float8_e4m3fn, torch.float8_e5m2)


def _tensors(args, kwargs):
    flat, _ = torch.utils._pytree.tree_flatten((args, kwargs))
    return [x for x in flat if isinstance(x, torch.Tensor)]


def _matmul_flops(op: str, tensors: list[torch.Tensor]) -> float | None:
    """2·M·N·K for the matmul family, from the operand shapes; None for other ops."""
    dims = [t for t in tensors if t.dim() >= 2]
    if op in ("aten::mm", "aten::matmul") and len(dims) >= 2:
        a, b = dims[0], dims[1]
        return 2.0 * a.shape[-2] * a.shape[-1] * b.shape[-1]
    if op == "aten::addmm" and len(dims) >= 2:
        a, b = dims[-2], dims[-1]
        return 2.0 * a.shape[-2] * a.shape[-1] * b.shape[-1]
    if op in ("aten::bmm", "aten::baddbmm") and len(dims) >= 2:
        a, b = dims[-2], dims[-1]
        return 2.0 * a.shape[0] * a.shape[1] * a.shape[2] * b.shape[2]
    if op in ("aten::convolution", "aten::_convolution", "aten::convolution_backward") and len(dims) >= 2:
        x, w = dims[0], dims[1]
        spatial = math.prod(x.shape[2:]) if x.dim() > 2 else 1
        factor = 2.0 if op != "aten::convolution_backward" else 4.0
        return factor * x.shape[0] * w.shape[0] * math.prod(w.shape[1:]) * spatial
    return None


def estimate_seconds(target: Target, op: str, args, kwargs, on_host: bool) -> float:
    tensors = _tensors(args, kwargs)
    moved = sum(t.numel() * t.element_size() for t in tensors)
    largest = max((t.numel() * t.element_size() for t in tensors), default=0)
    moved += largest  # the result, about the size of the largest operand for most ops
    if on_host:
        return 2 * target.launch_overhead_s + moved / target.host_link_bytes_per_s
    flops = _matmul_flops(op, tensors)
    if flops is not None:
        low = any(t.dtype in LOW_PRECISION for t in tensors)
        rate = target.bf16_flops_per_core if low else target.fp32_flops_per_core
    else:
        flops = float(max((t.numel() for t in tensors), default=0))
        rate = target.vector_flops_per_core
    return target.launch_overhead_s + max(flops / rate, moved / target.hbm_bytes_per_s_per_core)
