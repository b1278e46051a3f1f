"""Fused attention's GEMMs priced as the NKI Library's attention kernels lay them out (costmodel/engines.py,
_attention_gemms): at decode the token-generation kernel stacks the query heads that share a key/value head into
the rows of one GEMM per batch and kv head; context encoding and the backward run one GEMM per batch and query
head. Pinned by structure (which shapes cost alike, what falls with what), not by a number fitted to a row."""
import pytest
import torch

from localneuron.costmodel import tiles
from localneuron.costmodel.engines import DECODE_ATTENTION_MAX_QUERIES, op_work
from localneuron.costmodel.hardware import CHIPS
from localneuron.estimate import architecture, recipe
from localneuron.estimate.layout import Layout
from localneuron.estimate.plan import Request
from localneuron.estimate.trace import fake_device

TRN1, TRN2 = CHIPS["trn1"], CHIPS["trn2"]
FORWARD = "aten::_scaled_dot_product_fused_attention_overrideable"
BACKWARD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def attention_tensor_s(chip, batch, heads, kv_heads, queries, context, head_dim=128, backward=False):
    """TensorE seconds of one fused attention of `heads` query heads over `kv_heads` key/value heads."""
    q, kv = meta(batch, heads, queries, head_dim), meta(batch, kv_heads, context, head_dim)
    if backward:
        return op_work(chip, BACKWARD, [q, q, kv, kv], [q, kv, kv]).engine_s["tensor"]
    return op_work(chip, FORWARD, [q, kv, kv], [q]).engine_s["tensor"]


@pytest.mark.parametrize("chip", [TRN1, TRN2], ids=["trn1", "trn2"])
def test_decode_attention_per_query_head_falls_with_the_group_at_fixed_kv_bytes(chip):
    # the same key/value heads (the same KV bytes read), shared by 1, 2, 4, 8 query heads each: the stacked rows
    # ride in the stationary tile the single query row already paid for
    times = [attention_tensor_s(chip, 4, 2 * group, 2, 1, 4096) for group in (1, 2, 4, 8)]
    per_query_head = [t / (2 * group) for t, group in zip(times, (1, 2, 4, 8))]
    assert per_query_head == sorted(per_query_head, reverse=True) and len(set(per_query_head)) == 4
    assert times[-1] < 2 * times[0]   # 8x the query heads, not 8x the time


@pytest.mark.parametrize("chip", [TRN1, TRN2], ids=["trn1", "trn2"])
def test_gqa_decode_costs_less_than_the_same_heads_with_their_kv_repeated(chip):
    grouped = attention_tensor_s(chip, 32, 8, 2, 1, 4097)
    repeated = attention_tensor_s(chip, 32, 8, 8, 1, 4097)   # what the op sees when k/v are repeated before it
    assert grouped < repeated / 2
    # a few speculative positions stack too; past the kernel's bound it is context encoding: per query head
    assert attention_tensor_s(chip, 1, 8, 2, DECODE_ATTENTION_MAX_QUERIES, 4096) < \
        attention_tensor_s(chip, 1, 8, 8, DECODE_ATTENTION_MAX_QUERIES, 4096)


@pytest.mark.parametrize("chip", [TRN1, TRN2], ids=["trn1", "trn2"])
def test_multi_head_attention_is_one_gemm_per_batch_and_head(chip):
    # MHA is unchanged: b x h GEMMs of the query rows, each what one (1, 1) attention's are
    for queries in (1, 128, 512):
        one = attention_tensor_s(chip, 1, 1, 1, queries, 2048)
        assert attention_tensor_s(chip, 2, 8, 8, queries, 2048) == pytest.approx(16 * one)
        assert attention_tensor_s(chip, 2, 8, 8, queries, 2048, backward=True) == \
            pytest.approx(16 * attention_tensor_s(chip, 1, 1, 1, queries, 2048, backward=True))


@pytest.mark.parametrize("chip", [TRN1, TRN2], ids=["trn1", "trn2"])
def test_context_encoding_and_the_backward_run_per_query_head(chip):
    # the prefill kernel maps each query head to its kv head, the backward loops a kv head's query heads: grouped
    # k/v cost what the same k/v repeated to every query head cost
    for queries in (DECODE_ATTENTION_MAX_QUERIES + 1, 128, 2048):
        assert attention_tensor_s(chip, 2, 8, 2, queries, 2048) == \
            pytest.approx(attention_tensor_s(chip, 2, 8, 8, queries, 2048))
    assert attention_tensor_s(chip, 2, 8, 2, 1, 2048, backward=True) == \
        pytest.approx(attention_tensor_s(chip, 2, 8, 8, 1, 2048, backward=True))


def test_grouped_rows_are_the_tile_rule_of_one_stacked_gemm():
    # one batch, one kv head, 4 query heads at one position: the scores are one [4, d] @ [d, t] GEMM, the weighted
    # values one [4, t] @ [t, dv]; with every shape at the table's efficiency this is the tile rule's ratio
    t, d = 4096, 128
    grouped = attention_tensor_s(TRN2, 1, 4, 1, 1, t, d)
    mha = attention_tensor_s(TRN2, 1, 4, 4, 1, t, d)
    stacked = tiles.gemm_cycles(4, d, t, False) + tiles.gemm_cycles(4, t, d, False)
    single = tiles.gemm_cycles(1, d, t, False) + tiles.gemm_cycles(1, t, d, False)
    assert stacked == single   # four rows cost one row's tiles
    assert mha / grouped == pytest.approx(4, rel=0.5)


def test_the_recipe_hands_the_fused_op_its_kv_heads_without_repeating_them():
    # the builder passes k/v with the model's kv heads (the device's fused op takes them so), so the cost model
    # reads the group from the op's operands, the one place, and no copy repeats the KV cache in the trace
    arch = architecture.from_config({"model_type": "llama", "hidden_size": 1024, "num_hidden_layers": 2,
                                     "num_attention_heads": 16, "num_key_value_heads": 4, "intermediate_size": 2048,
                                     "vocab_size": 4096})
    layout = Layout.make(TRN2, 1, 2, 1, 1)
    request = Request(mode="decode", batch=4, input_len=1024, output_len=16)
    with fake_device():
        stack = recipe.inference_stack(arch, layout, request.decoding(), 1, 1024)
    layer = stack.kinds[0][0]
    attention = [op for op in layer.graphs.forward if op.name == FORWARD]
    assert len(attention) == 1
    q, k, v = (t for _, t in attention[0].inputs[:3])
    assert (q.shape[1], k.shape[1], v.shape[1]) == (8, 2, 2)   # 16 / tp query heads, 4 / tp kv heads
    cache = 4 * 2 * 1025 * 128 * 2
    assert not any(op.name == "aten::clone" and sum(t.numel() * t.element_size() for _, t in op.outputs) >= cache
                   for op in layer.graphs.forward)
