"""A prompt's MoE layer on a stack that encodes it block by block (NxD's blockwise path) is priced on Trainium2 as
the NKI Library's context-encoding MoE kernel runs it: a fixed part plus the same time for every block, from the NKI
cycle model (costmodel/moe_blocks.py, moe_block_table.py), not one grouped GEMM over all blocks."""
import dataclasses
import importlib
import os
import sys
from pathlib import Path

import pytest
import torch

from localneuron.costmodel import engines, moe_block_table, moe_blocks, stacks
from localneuron.costmodel.hardware import chip
from localneuron.estimate import architecture, plan, recipe
from localneuron.estimate.layout import Layout
from localneuron.estimate.trace import fake_device
from localneuron.nki import library_tree

ROOT = Path(__file__).resolve().parents[2]
TRN1, TRN2 = chip("trn1"), chip("trn2")


def small_moe(experts: int, hidden: int = 1024, inner: int = 256):
    return architecture.from_config({"model_type": "qwen3_moe", "hidden_size": hidden, "num_hidden_layers": 2,
                                     "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": 2048,
                                     "moe_intermediate_size": inner, "num_experts": experts,
                                     "num_experts_per_tok": 2, "vocab_size": 4096})


def prompt_ops(target, arch, tokens=1024):
    """The ops of the first layer of a prompt of `tokens` tokens, traced as the recipe builds it."""
    layout = Layout.make(target, 1, 1, 1, 1)
    with fake_device():
        stack = recipe.inference_stack(arch, layout, plan.Request(mode="prefill", input_len=tokens, output_len=4),
                                       tokens, 0)
    return stack.kinds[0][0].graphs.forward


def kernel_op_seconds(target, hidden, inner, blocks, experts=16):
    meta = dict(dtype=torch.bfloat16, device="meta")
    operands = [torch.empty(4096, hidden, **meta), torch.empty(experts, hidden, 2 * inner, **meta),
                torch.empty(experts, inner, hidden, **meta),
                torch.empty(blocks * moe_blocks.BLOCK, dtype=torch.int32, device="meta")]
    return engines.op_work(target, moe_blocks.OP, operands, operands[:1]).engine_s["tensor"]


def test_the_kernel_costs_a_fixed_part_and_the_same_time_for_every_block():
    # the kernel walks its blocks one after another, each re-reading its expert's weights and its token rows:
    # every block adds the same time, set by the layer's sizes, not by how many blocks there are
    one = kernel_op_seconds(TRN2, 2048, 192, 1)
    per_block = kernel_op_seconds(TRN2, 2048, 192, 2) - one
    assert per_block > 0
    for blocks in (23, 191):
        assert kernel_op_seconds(TRN2, 2048, 192, blocks) == pytest.approx(one + (blocks - 1) * per_block)
    # the time a block is the cycle model's for the kernel at those sizes (below one full tile of intermediate per
    # physical core, the smallest entry), and grows with hidden and intermediate
    fixed, tabled = moe_block_table.TABLE[("trn2", 2)][(2048, 256)]
    assert per_block == pytest.approx(tabled)
    assert kernel_op_seconds(TRN2, 4096, 256, 2) - kernel_op_seconds(TRN2, 4096, 256, 1) > per_block
    assert kernel_op_seconds(TRN2, 2048, 1024, 2) - kernel_op_seconds(TRN2, 2048, 1024, 1) > per_block


def test_a_prompts_moe_layer_on_trn2_is_one_kernel_over_its_blocks():
    target = dataclasses.replace(TRN2, stack="optimum-neuron")
    arch = small_moe(64)
    ops = prompt_ops(target, arch)
    kernels = [op for op in ops if op.name == moe_blocks.OP]
    assert len(kernels) == 1
    # 1024 tokens x 2 experts each over 64 experts: ceil((2048 - 63) / 512) + 63 blocks, every one whole
    blocks, rows = stacks.moe_prefill_blocks("optimum-neuron", 1024, 64, 2)
    positions = kernels[0].inputs[3][1]
    assert positions.numel() == blocks * rows
    assert not any(op.name == "aten::bmm" for op in ops)   # no grouped GEMM beside it


def test_the_prompts_moe_price_grows_by_the_kernels_time_a_block():
    target = dataclasses.replace(TRN2, stack="optimum-neuron")

    def kernel_seconds(experts):
        ops = prompt_ops(target, small_moe(experts))
        op = next(op for op in ops if op.name == moe_blocks.OP)
        return engines.op_work(target, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs]).compute_s
    few, many = (stacks.moe_prefill_blocks("optimum-neuron", 1024, e, 2)[0] for e in (8, 64))
    per_block = moe_blocks.kernel_seconds("trn2", 2, 1024, 256, 2) - moe_blocks.kernel_seconds("trn2", 2, 1024, 256, 1)
    assert kernel_seconds(64) - kernel_seconds(8) == pytest.approx((many - few) * per_block)


def test_where_the_kernel_is_not_written_for_the_layer_the_blocks_run_as_grouped_gemms():
    # trn1 (the kernel is TRN2's, LNC=2), the default stack (no blocks), and
    # an intermediate per rank the kernel does not take (not a multiple of 16): the grouped GEMMs as before
    cases = [(dataclasses.replace(TRN1, stack="optimum-neuron"), small_moe(64)),
             (TRN2, small_moe(64)),
             (dataclasses.replace(TRN2, stack="optimum-neuron"), small_moe(64, inner=200))]
    for target, arch in cases:
        names = {op.name for op in prompt_ops(target, arch)}
        assert moe_blocks.OP not in names
    assert moe_blocks.kernel_seconds("trn1", 1, 2048, 256, 4) is None
    assert not moe_blocks.runs(2048, 24) and not moe_blocks.runs(9216, 256) and moe_blocks.runs(5120, 128)


@pytest.mark.skipif(library_tree.find(None) is None, reason="the NKI Library tree is not here")
def test_the_table_is_the_cycle_models_time_for_the_library_kernel(monkeypatch):
    # one cell again from the kernel itself (timing-only, a second or two)
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen3")
    generator = importlib.import_module("moe_block_table")
    kernel, modes = generator._kernel()
    few, many = (generator.kernel_seconds(kernel, modes, 2, 1024, 256, n) for n in generator.BLOCKS)
    fixed, per_block = moe_block_table.TABLE[("trn2", 2)][(1024, 256)]
    assert (many - few) / (generator.BLOCKS[1] - generator.BLOCKS[0]) == pytest.approx(per_block, rel=1e-3)
