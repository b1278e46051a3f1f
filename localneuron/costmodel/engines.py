"""What one aten op asks of each NeuronCore engine: TensorE cycles from the NKI tile rules, passes of
VectorE / ScalarE / GpSimd over its elements, and the bytes its operands occupy.

An op is named as the dispatcher names it ("aten::mm"); its operands are tensors (real, fake or meta:
only shapes and dtypes are read). The rule it is priced by comes from its record; ops without one are
element-wise VectorE work: one pass per full-size tensor operand, the published tensor_tensor cost being
twice a single-input one.
"""
import math
from dataclasses import dataclass, field

import torch

from localneuron.costmodel import gemm_efficiency, moe_blocks, tiles
from localneuron.costmodel.hardware import Chip

ENGINES = ("tensor", "vector", "scalar", "gpsimd")
FP32_MATMUL = (torch.float32, torch.float64)

# The rules an op is priced by. Which op follows which rule is said once, in the op's record
# (localneuron/ops/op_records.py, a layer above), which hands the table down with use_rules().


@dataclass(frozen=True)
class Matmul:
    """TensorE GEMMs, found in the operands as `layout` places them: "mm" (a @ b), "addmm" (bias, a, b),
    "linear" (input (..., k), weight (n, k), bias),
    "bmm" (batched), "grouped_mm" (one GEMM per group of a MoE layer), "convolution" (im2col GEMM),
    "convolution_backward" (two of them), "linear_backward" (the input's and the weight's gradients, and the
    bias's as a GEMM with a ones row: what output_mask skips is priced too)."""
    layout: str


@dataclass(frozen=True)
class Attention:
    """Fused attention: `passes` 1 for the forward; 2 for the backward (dQ, dK, dV and the recomputed scores)."""
    passes: int


@dataclass(frozen=True)
class _Passes:
    vector: float = 0
    scalar: float = 0
    gpsimd: float = 0

    def __str__(self) -> str:
        return f"{type(self).__name__}(" + ", ".join(f"{engine}={passes:g}" for engine, passes in _passes(self)) + ")"


@dataclass(frozen=True)
class Rows(_Passes):
    """Along the last axis, one row per partition: passes over the row per engine (reference 8.2-8.3)."""


@dataclass(frozen=True)
class Elementwise(_Passes):
    """Passes over the output per engine (the default rule: VectorE, one pass per full-size operand, at most 2)."""


@dataclass(frozen=True)
class Reduction:
    """One VectorE pass over the input (bf16 add/max run at N/2; the model keeps N, the general case)."""


@dataclass(frozen=True)
class Movement:
    """Data movement: the DMA queues do it; no compute engine."""


@dataclass(frozen=True)
class Free:
    """Allocation or metadata only: nothing runs."""


@dataclass(frozen=True)
class Conversion(Elementwise):
    """A dtype conversion: one VectorE pass when it runs alone; inside a fused loop of a compiled graph
    the neighbouring instruction converts as it reads or writes, so it costs nothing there."""


@dataclass(frozen=True)
class MoePrefillBlocks:
    """A prompt's routed experts as the NKI Library's context-encoding MoE kernel runs them, block after block, timed
    whole by the NKI cycle model (costmodel/moe_blocks.py). Operands: the hidden states (tokens, hidden), the experts'
    gate/up weights (experts, hidden, 2 x intermediate), their down weights (experts, intermediate, hidden) and the
    blocks' token positions (blocks x rows of a block)."""


REDUCTION, MOVEMENT, FREE, CONVERSION = Reduction(), Movement(), Free(), Conversion(vector=1)
_rules: dict = {}
# the kernels the estimate records itself (no aten op, so no op record names them): name -> rule
_KERNELS = {moe_blocks.OP: MoePrefillBlocks()}


def use_rules(rules: dict) -> None:
    """rules: "aten::name" -> its rule; ops not named are element-wise VectorE work."""
    _rules.clear()
    _rules.update(rules)


def rule(name: str):
    """The rule `name` is priced by (None: element-wise VectorE work)."""
    found = _rules.get(name)
    return found if found is not None else _KERNELS.get(name)


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


def _gemms(layout: str, inputs: list) -> list[tuple]:
    """(batch, m, k, n, fp32) for each GEMM of a matmul-like op."""
    if layout == "linear_backward" and len(inputs) == 3:  # input (..., k), grad_output (..., n), weight (n, k)
        x, weight = inputs[0], inputs[2]
        n, k = weight.shape
        m = x.numel() // max(1, k)
        fp32 = any(t.dtype in FP32_MATMUL for t in inputs)
        return [(1, m, n, k, fp32), (1, n, m, k, fp32), (1, 1, m, n, fp32)]
    if layout == "linear" and len(inputs) >= 2 and inputs[1].dim() == 2:  # input (..., k), weight (n, k), then the bias
        x, weight = inputs[0], inputs[1]
        n, k = weight.shape
        return [(1, x.numel() // max(1, k), k, n, any(t.dtype in FP32_MATMUL for t in inputs))]
    mats = [t for t in inputs if t.dim() >= 2]
    if len(mats) < 2:
        return []
    fp32 = any(t.dtype in FP32_MATMUL for t in mats)
    if layout == "mm":
        a, b = mats[0], mats[1]
        return [(1, a.shape[0], a.shape[1], b.shape[1], fp32)]
    if layout == "addmm":
        a, b = mats[-2], mats[-1]
        return [(1, a.shape[0], a.shape[1], b.shape[1], fp32)]
    if layout == "bmm":
        a, b = mats[-2], mats[-1]
        if a.dim() != 3 or b.dim() != 3:  # priced before the kernel runs: leave the refusal to its own check
            return []
        return [(a.shape[0], a.shape[1], a.shape[2], b.shape[2], fp32)]
    if layout == "grouped_mm":  # the groups split the rows of a 2-d a, the columns of a 2-d b, or K when both are
        a, b = mats[0], mats[1]
        if a.dim() == 3 and b.dim() == 3:
            return [(a.shape[0], a.shape[1], a.shape[2], b.shape[2], fp32)]
        return [(1, a.shape[-2], a.shape[-1], b.shape[-1], fp32)]
    # convolution as the GEMM of im2col: (batch x output positions) x (in channels x kernel) x out channels
    backward = layout == "convolution_backward"
    x, w = (mats[1], mats[2]) if backward and len(mats) >= 3 else (mats[0], mats[1])
    positions = x.shape[0] * (math.prod(x.shape[2:]) if x.dim() > 2 else 1)
    gemm = (1, positions, math.prod(w.shape[1:]), w.shape[0], fp32)
    return [gemm, gemm] if backward else [gemm]


# The most query positions the NKI Library's token-generation attention kernel is for (attention_tkg.py, "INTENDED
# USAGE: Use with s_active <= 7"): at that many positions or fewer, a forward attention runs as that kernel.
DECODE_ATTENTION_MAX_QUERIES = 7


def _attention_gemms(passes: int, inputs: list) -> tuple[list, int, int]:
    """GEMMs of fused attention (the scores over the query/key head size, the weighted values over the value head size)
    as the NKI Library's attention kernels lay them out, and its score rows. The backward's inputs start with the
    output's gradient. Grouped-query attention reaches the op as keys and values with fewer heads than the queries
    (the query heads of a group share one key/value head: the fused op takes them so, csrc/aten/attention.cpp).
    A forward over a few query positions (decode) runs as the token-generation kernel, which stacks the query heads
    sharing a key/value head into the rows of one GEMM against that head's keys and values: rows = query positions
    x query heads per kv head, one GEMM per batch and kv head (nkilib/core/attention/attention_tkg.py: q [B, d, H,
    s_active] against k_prior [B, 1, s_prior, d], "qk[batch_idx] = matmul(k_sb, q_sb[batch_idx])"; its caller
    attention_block_tkg.py: "kv_heads: 1 (GQA with single KV head)"). A longer forward (context encoding) and the
    backward run one GEMM per batch and query head over the query positions, the kv head read for each query head
    of its group (attention_cte.py: "maps Q batch id to correct KV batch id"; attention_bwd.py loops the
    nheads_per_kv_head query heads of a kv head)."""
    q, k, v = inputs[passes - 1:passes + 2]
    batch_heads = math.prod(q.shape[:-2])
    s, t, d, dv = q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]
    fp32 = q.dtype in FP32_MATMUL
    group = 1
    if passes == 1 and s <= DECODE_ATTENTION_MAX_QUERIES and q.dim() >= 3 and k.dim() >= 3 and \
            0 < k.shape[-3] < q.shape[-3] and q.shape[-3] % k.shape[-3] == 0:
        group = q.shape[-3] // k.shape[-3]
    gemms = [(batch_heads // group, s * group, d, t, fp32), (batch_heads // group, s * group, t, dv, fp32)]
    return gemms * (2 * passes - 1), batch_heads * s, t


def _passes(rule) -> list[tuple[str, float]]:
    return [(engine, passes) for engine, passes in vars(rule).items() if passes]


def op_work(chip: Chip, name: str, inputs: list, outputs: list) -> OpWork:
    """Engine time of one op on one logical core of `chip` (LNC physical cores share the work)."""
    return rule_work(chip, rule(name), inputs, outputs)


def _moe_prefill_blocks(chip: Chip, inputs: list) -> OpWork:
    """The kernel's time on one logical core (moe_blocks.kernel_seconds), on TensorE's account: the engine its
    blocks wait on in turn with the DMA queues, which the kernel's time already holds."""
    _, up, down, positions = inputs[:4]
    hidden, inner, blocks = up.shape[1], down.shape[1], moe_blocks.blocks_of(positions.numel())
    seconds = moe_blocks.kernel_seconds(chip.name, chip.lnc, hidden, inner, blocks)
    if seconds is None:
        raise ValueError(f"{moe_blocks.OP}: the NKI Library's MoE kernel is not tabled for {chip.name} at LNC={chip.lnc}")
    work = OpWork(flops=2.0 * blocks * moe_blocks.BLOCK * hidden * 3 * inner)
    work.engine_s["tensor"] = seconds
    return work


def rule_work(chip: Chip, rule, inputs: list, outputs: list) -> OpWork:
    """Engine time on one logical core of `chip` of work priced by `rule` (None: element-wise VectorE work)."""
    core = chip.core
    work = OpWork()
    if isinstance(rule, (Free, Movement)):
        return work
    if isinstance(rule, MoePrefillBlocks):
        return _moe_prefill_blocks(chip, inputs)
    cycles = dict.fromkeys(ENGINES, 0.0)
    gemms = []
    if isinstance(rule, Matmul):
        gemms = _gemms(rule.layout, inputs)
    elif isinstance(rule, Attention) and len(inputs) >= rule.passes + 2:
        gemms, rows, row_length = _attention_gemms(rule.passes, inputs)
        cycles["vector"] += 2 * rule.passes * tiles.row_cycles(rows, row_length)
        cycles["scalar"] += rule.passes * tiles.row_cycles(rows, row_length)
    elif isinstance(rule, Rows) and inputs:
        x = max(inputs, key=lambda t: t.numel())
        rows, row_length = x.numel() // max(1, x.shape[-1] if x.dim() else 1), (x.shape[-1] if x.dim() else 1)
        for engine, passes in _passes(rule):
            cycles[engine] += passes * tiles.row_cycles(rows, row_length)
    else:
        out_elements = max((t.numel() for t in outputs), default=0)
        if isinstance(rule, Elementwise):
            for engine, passes in _passes(rule):
                cycles[engine] += passes * tiles.elementwise_cycles(out_elements)
        elif isinstance(rule, Reduction):
            cycles["vector"] += tiles.elementwise_cycles(max((t.numel() for t in inputs), default=0))
        elif out_elements:
            full_size = sum(1 for t in inputs if t.numel() == out_elements) or 1
            cycles["vector"] += min(full_size, 2) * tiles.elementwise_cycles(out_elements)
    for batch, m, k, n, fp32 in gemms:
        if batch * m * k * n == 0:   # an empty operand: nothing to multiply
            continue
        # the tile rule at the fraction of it a well-blocked kernel of this shape reaches (the NKI cycle model's
        # table), and at the fraction of that the stack's compiled GEMMs reach
        cycles["tensor"] += (batch * tiles.gemm_cycles(m, k, n, fp32, core.pe_array, core.fp32_matmul_slowdown)
                             / gemm_efficiency.efficiency(chip.name, m, k, n, fp32) / chip.efficiencies.matmul)
        work.flops += 2.0 * batch * m * k * n
    for engine in ENGINES:
        work.engine_s[engine] = cycles[engine] / (core.clock_ghz[engine] * 1e9) / chip.lnc
    return work
