"""Estimated utilisation of the NeuronCore over a window of the device timeline, as Neuron Explorer's
summary reports it: MFU (model FLOPs / peak FLOPs over the window), HFU (FLOPs the hardware executed /
peak; equal to MFU here, since the simulated device executes exactly the model's FLOPs) and MBU (HBM
bytes moved / HBM bandwidth over the window). All of it rests on estimates, and is labelled so: the FLOPs
and bytes are those the cost model gave each span's work when it was issued (costmodel/work.py)."""
from localneuron.runtime.config import selected_target

# the work whose FLOPs and bytes the engines spend; copies and collectives move data for it
COMPUTE_KINDS = ("op", "graph", "nki")


def utilisation(spans, seconds: float) -> dict:
    """spans: device spans (device_clock.DeviceSpan); seconds: the window's length on the device clock."""
    target = selected_target()
    flops = moved = 0.0
    low_precision_flops = 0.0
    for s in spans:
        if s.work is None or s.work.kind not in COMPUTE_KINDS:
            continue
        flops += s.work.flops
        moved += s.work.bytes
        low_precision_flops += s.work.flops if s.work.low_precision else 0.0
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
