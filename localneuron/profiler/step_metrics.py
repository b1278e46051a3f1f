"""Estimated utilisation of the NeuronCore over a window of the device timeline, as Neuron Explorer's
summary reports it: MFU (model FLOPs / peak FLOPs over the window), HFU (FLOPs the hardware executed /
peak; equal to MFU here, since the simulated device executes exactly the model's FLOPs) and MBU (HBM
bytes moved / HBM bandwidth over the window). All of it rests on estimates, and is labelled so."""
import re

import torch

from localneuron.profiler import estimates
from localneuron.runtime.config import selected_target

_TENSOR = re.compile(r"(\w+)\[([\d, ]*)\]")


def signature_tensors(signature: str) -> list[torch.Tensor]:
    """The meta tensors an executable's signature ('float32[32, 48], bfloat16[8]') describes."""
    tensors = []
    for dtype, shape in _TENSOR.findall(signature):
        dims = [int(d) for d in shape.split(",") if d.strip()]
        tensors.append(torch.empty(dims, dtype=getattr(torch, dtype), device="meta"))
    return tensors


def utilisation(spans, seconds: float) -> dict:
    """spans: device spans with details op/signature; seconds: the window's length on the device clock."""
    target = selected_target()
    flops = moved = 0.0
    low_precision_flops = 0.0
    for s in spans:
        signature, op = s.details.get("signature"), s.details.get("op")
        if not signature or not op:
            continue
        f, b, low = estimates.work_of(op, signature_tensors(signature))
        flops += f
        moved += b
        low_precision_flops += f if low else 0.0
    peak = target.bf16_flops_per_core if low_precision_flops >= flops / 2 else target.fp32_flops_per_core
    window = max(seconds, 1e-12)
    return {
        "estimated_device_seconds": seconds,
        "matmul_flops": flops,
        "hbm_bytes": moved,
        "mfu": flops / (peak * window),
        "hfu": flops / (peak * window),
        "mbu": moved / (target.hbm_bytes_per_s * target.lnc / target.physical_cores * window),  # vs the core's HBM share
        "peak_flops_used": peak,
    }
