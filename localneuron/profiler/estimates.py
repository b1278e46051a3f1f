"""The profiler's calls into the cost model, kept in this file only: swapping the cost model underneath
changes these two functions. Executables carry their time estimate from compile time; this prices the
rest (copies, collectives) and gives the FLOPs and bytes behind the utilisation figures."""
from localneuron.runtime import cost_model
from localneuron.runtime.config import selected_target


def estimated_seconds(op: str, args: tuple, on_host: bool) -> float:
    return cost_model.estimate_seconds(selected_target(), op, args, {}, on_host=on_host)


def work_of(op: str, tensors: list) -> tuple[float, float, bool]:
    """(matmul FLOPs, HBM bytes moved, whether the FLOPs are low precision) of one run of `op`."""
    moved = sum(t.numel() * t.element_size() for t in tensors)
    moved += max((t.numel() * t.element_size() for t in tensors), default=0)  # the result, as the cost model counts it
    flops = cost_model._matmul_flops(op, tensors) or 0.0
    return flops, float(moved), any(t.dtype in cost_model.LOW_PRECISION for t in tensors)
