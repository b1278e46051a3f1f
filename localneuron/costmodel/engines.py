"""What one aten op asks of each NeuronCore engine: TensorE cycles from the NKI tile rules, passes of
VectorE / ScalarE / GpSimd over its elements, and the bytes its operands occupy.

An op is named as the dispatcher names it ("aten::mm"); its operands are tensors (real, fake or meta:
only shapes and dtypes are read). Ops the tables do not name are element-wise VectorE work: one pass
per full-size tensor operand, the published tensor_tensor cost being twice a single-input one.
"""
import math
from dataclasses import dataclass, field

import torch

from localneuron.costmodel import tiles
from localneuron.costmodel.assumptions import TENSOR_ENGINE_EFFICIENCY
from localneuron.costmodel.hardware import Chip

ENGINES = ("tensor", "vector", "scalar", "gpsimd")
FP32_MATMUL = (torch.float32, torch.float64)

# Matmul-like ops: how to find their GEMMs is in _gemms below.
MATMUL_OPS = {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::_scaled_mm", "aten::convolution",
              "aten::_convolution", "aten::convolution_backward"}
ATTENTION_OPS = {
    "aten::_scaled_dot_product_fused_attention_overrideable": 1,
    "aten::_scaled_dot_product_flash_attention_for_cpu": 1,
    "aten::_scaled_dot_product_flash_attention": 1,
    "aten::_scaled_dot_product_efficient_attention": 1,
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": 2,  # dQ, dK, dV and the recomputed scores
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": 2,
    "aten::_scaled_dot_product_flash_attention_backward": 2,
    "aten::_scaled_dot_product_efficient_attention_backward": 2,
}

# Ops along the last axis, one row per partition: engine -> passes over the row (reference §8.2-8.3).
ROW_OPS = {
    "aten::_softmax": {"vector": 2, "scalar": 1},         # row max; exp with its sum on ScalarE; scale by 1/sum
    "aten::_log_softmax": {"vector": 2, "scalar": 2},     # as softmax, plus the log of the sum
    "aten::_softmax_backward_data": {"vector": 4},        # g*y, its row sum, (g - sum)*y
    "aten::_log_softmax_backward_data": {"vector": 3, "scalar": 1},
    "aten::native_layer_norm": {"vector": 4, "scalar": 1},  # bn_stats/aggr, normalise, scale and shift
    "aten::native_layer_norm_backward": {"vector": 8, "scalar": 1},
    "aten::_fused_rms_norm": {"vector": 2, "scalar": 1},
    "aten::_fused_rms_norm_backward": {"vector": 5},
}
# Element-wise ops off the default rule: engine -> passes over the output.
ELEMENTWISE_OPS = {
    **{f"aten::{name}": {"scalar": 1} for name in (
        "exp", "exp2", "expm1", "log", "log1p", "log2", "tanh", "sigmoid", "gelu", "silu", "mish", "elu",
        "rsqrt", "sqrt", "erf", "erfc", "sin", "cos", "softplus", "reciprocal", "pow", "hardswish", "hardsigmoid",
        "exp_", "tanh_", "sigmoid_", "silu_", "rsqrt_", "sqrt_", "pow_", "reciprocal_")},
    **{f"aten::{name}": {"scalar": 1, "vector": 2} for name in (   # derivative on ScalarE, times the gradient
        "gelu_backward", "silu_backward", "tanh_backward", "sigmoid_backward", "elu_backward", "mish_backward",
        "softplus_backward", "hardswish_backward")},
    "aten::native_dropout": {"gpsimd": 1, "vector": 2},       # random bits on GpSimd, mask and scale
    "aten::native_dropout_backward": {"vector": 2},
    "aten::bernoulli_": {"gpsimd": 1}, "aten::bernoulli": {"gpsimd": 1}, "aten::uniform_": {"gpsimd": 1},
    "aten::normal_": {"gpsimd": 2}, "aten::rand": {"gpsimd": 1}, "aten::randn": {"gpsimd": 2},
    "aten::zero_": {"vector": 0.5}, "aten::fill_": {"vector": 0.5},   # memset zero into 16 bits runs at N/2
}
# Reductions: one pass over the input (bf16 add/max run at N/2; the model keeps N, the general case).
REDUCTIONS = {"aten::sum", "aten::mean", "aten::amax", "aten::amin", "aten::max", "aten::min", "aten::var",
              "aten::std", "aten::var_mean", "aten::norm", "aten::linalg_vector_norm", "aten::argmax", "aten::argmin",
              "aten::prod", "aten::all", "aten::any", "aten::logsumexp", "aten::cumsum"}
# Data movement: the DMA queues do it; no compute engine.
MOVEMENT_OPS = {"aten::copy_", "aten::clone", "aten::cat", "aten::stack", "aten::index_select", "aten::embedding",
                "aten::gather", "aten::scatter", "aten::scatter_add", "aten::index", "aten::index_put_",
                "aten::index_put", "aten::slice_scatter", "aten::select_scatter", "aten::select_backward",
                "aten::slice_backward", "aten::embedding_dense_backward", "aten::repeat", "aten::constant_pad_nd",
                "aten::contiguous", "aten::_unsafe_view", "aten::roll", "aten::flip", "aten::tril", "aten::triu"}
# Allocation only: nothing runs.
FREE_OPS = {"aten::empty", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided", "aten::empty_like",
            "aten::detach", "aten::lift_fresh", "aten::_local_scalar_dense", "aten::set_", "aten::resize_",
            "aten::scalar_tensor", "aten::arange", "aten::full", "aten::zeros", "aten::ones", "aten::zeros_like",
            "aten::ones_like", "aten::full_like", "aten::new_zeros", "aten::new_ones", "aten::new_full"}


@dataclass
class OpWork:
    """Engine seconds and operand bytes of one op on one logical core."""
    engine_s: dict = field(default_factory=lambda: dict.fromkeys(ENGINES, 0.0))
    flops: float = 0.0

    @property
    def compute_s(self) -> float:
        return max(self.engine_s.values())

    @property
    def busiest(self) -> str:
        return max(self.engine_s, key=self.engine_s.get)


def tensor_bytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def _gemms(name: str, inputs: list) -> list[tuple]:
    """(batch, m, k, n, fp32) for each GEMM of a matmul-like op."""
    mats = [t for t in inputs if t.dim() >= 2]
    if not mats:
        return []
    fp32 = any(t.dtype in FP32_MATMUL for t in mats)
    if name in ("aten::mm", "aten::_scaled_mm") and len(mats) >= 2:
        a, b = mats[0], mats[1]
        return [(1, a.shape[0], a.shape[1], b.shape[1], fp32)]
    if name == "aten::addmm" and len(mats) >= 2:
        a, b = mats[-2], mats[-1]
        return [(1, a.shape[0], a.shape[1], b.shape[1], fp32)]
    if name in ("aten::bmm", "aten::baddbmm") and len(mats) >= 2:
        a, b = mats[-2], mats[-1]
        return [(a.shape[0], a.shape[1], a.shape[2], b.shape[2], fp32)]
    if name in ("aten::convolution", "aten::_convolution", "aten::convolution_backward") and len(mats) >= 2:
        # convolution as the GEMM of im2col: (batch x output positions) x (in channels x kernel) x out channels
        x, w = (mats[1], mats[2]) if name == "aten::convolution_backward" and len(mats) >= 3 else (mats[0], mats[1])
        positions = x.shape[0] * (math.prod(x.shape[2:]) if x.dim() > 2 else 1)
        gemm = (1, positions, math.prod(w.shape[1:]), w.shape[0], fp32)
        return [gemm, gemm] if name == "aten::convolution_backward" else [gemm]
    return []


def _attention_gemms(name: str, inputs: list) -> tuple[list, int, int]:
    """GEMMs of fused attention (scores and weighted values per batch and head), and its score rows."""
    q, k = inputs[0], inputs[1]
    batch_heads = math.prod(q.shape[:-2])
    s, t, d = q.shape[-2], k.shape[-2], q.shape[-1]
    fp32 = q.dtype in FP32_MATMUL
    passes = ATTENTION_OPS[name]
    gemms = [(batch_heads, s, d, t, fp32), (batch_heads, s, t, d, fp32)] * (2 * passes - 1)
    return gemms, batch_heads * s, t


def op_work(chip: Chip, name: str, inputs: list, outputs: list) -> OpWork:
    """Engine time of one op on one logical core of `chip` (LNC physical cores share the work)."""
    core = chip.core
    work = OpWork()
    if name in FREE_OPS or name in MOVEMENT_OPS:
        return work
    cycles = dict.fromkeys(ENGINES, 0.0)
    gemms = []
    if name in MATMUL_OPS:
        gemms = _gemms(name, inputs)
    elif name in ATTENTION_OPS and len(inputs) >= 3:
        gemms, rows, row_length = _attention_gemms(name, inputs)
        passes = ATTENTION_OPS[name]
        cycles["vector"] += 2 * passes * tiles.row_cycles(rows, row_length)
        cycles["scalar"] += passes * tiles.row_cycles(rows, row_length)
    elif name in ROW_OPS and inputs:
        x = max(inputs, key=lambda t: t.numel())
        rows, row_length = x.numel() // max(1, x.shape[-1] if x.dim() else 1), (x.shape[-1] if x.dim() else 1)
        for engine, passes in ROW_OPS[name].items():
            cycles[engine] += passes * tiles.row_cycles(rows, row_length)
    else:
        out_elements = max((t.numel() for t in outputs), default=0)
        if name in ELEMENTWISE_OPS:
            for engine, passes in ELEMENTWISE_OPS[name].items():
                cycles[engine] += passes * tiles.elementwise_cycles(out_elements)
        elif name in REDUCTIONS:
            cycles["vector"] += tiles.elementwise_cycles(max((t.numel() for t in inputs), default=0))
        elif out_elements:
            full_size = sum(1 for t in inputs if t.numel() == out_elements) or 1
            cycles["vector"] += min(full_size, 2) * tiles.elementwise_cycles(out_elements)
    for batch, m, k, n, fp32 in gemms:
        cycles["tensor"] += batch * tiles.gemm_cycles(m, k, n, fp32, core.pe_array, core.fp32_matmul_slowdown)
        work.flops += 2.0 * batch * m * k * n
    for engine in ENGINES:
        seconds = cycles[engine] / (core.clock_ghz[engine] * 1e9) / chip.lnc
        work.engine_s[engine] = seconds / TENSOR_ENGINE_EFFICIENCY if engine == "tensor" else seconds
    return work
