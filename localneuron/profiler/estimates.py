"""The profiler's calls into the cost model, kept in this file only. Executables carry their time
estimate from compile time; this prices the rest (copies, collectives) and gives the FLOPs and bytes
behind the utilisation figures."""
import torch

from localneuron.costmodel import engines
from localneuron.costmodel.ops import eager_seconds
from localneuron.runtime.config import selected_target

LOW_PRECISION = (torch.bfloat16, torch.float16)


def _largest(tensors: list) -> list:
    return [max(tensors, key=lambda t: t.numel())] if tensors else []


def estimated_seconds(op: str, args: tuple, on_host: bool) -> float:
    tensors = [a for a in args if isinstance(a, torch.Tensor)]
    return eager_seconds(selected_target(), op, tensors, _largest(tensors), on_host)


def work_of(op: str, tensors: list) -> tuple[float, float, bool]:
    """(matmul FLOPs, HBM bytes moved, whether the FLOPs are low precision) of one run of `op`."""
    outputs = _largest(tensors)  # the result is about the size of the largest operand, as the eager estimate assumes
    moved = sum(engines.tensor_bytes(t) for t in tensors + outputs)
    flops = engines.op_work(selected_target(), op, tensors, outputs).flops
    return flops, float(moved), any(t.dtype in LOW_PRECISION for t in tensors)
