"""Weight-only quantized weights (--weights int8|fp8): read at their stored size, and, where TensorE cannot take
them as stored (int8), widened on VectorE in the graph, work that overlaps the DMA of the same weights but does
not vanish."""
import pytest
import torch

from localneuron.costmodel import ops, tiles
from localneuron.costmodel.hardware import chip
from localneuron.estimate import architecture, plan, run
from localneuron.estimate.layout import Layout
from localneuron.estimate.traced import trace_module

TRN1, TRN2 = chip("trn1"), chip("trn2")
SIDE = 8192   # one square matrix, large enough that its decode is bound by its weights, not by launch or latency


def decode_one_matrix(target, weights):
    """One token through one SIDE x SIDE bf16 linear layer, its matrix stored as `weights`."""
    layer = torch.nn.utils.skip_init(torch.nn.Linear, SIDE, SIDE, bias=False, device="neuron", dtype=torch.bfloat16)
    token = torch.empty(1, 1, SIDE, dtype=torch.bfloat16, device="neuron")
    return trace_module(target, layer, (token,), weights=weights)


def vector_pass_s(target, elements):
    """One VectorE pass over `elements`, one element per partition per cycle, split over the logical core."""
    return tiles.elementwise_cycles(elements) / (target.core.clock_ghz["vector"] * 1e9) / target.lnc


@pytest.fixture(scope="module")
def trn1_decodes():
    return {weights: decode_one_matrix(TRN1, weights) for weights in (None, "int8", "fp8")}


def test_widening_an_int8_matrix_is_one_vector_pass_over_its_elements():
    weight = torch.empty(SIDE, SIDE, dtype=torch.bfloat16, device="meta")
    work = ops.widening(TRN1, weight, torch.int8)
    assert work.engine_s["vector"] == pytest.approx(vector_pass_s(TRN1, SIDE * SIDE))
    assert work.engine_s["tensor"] == 0 and work.engine_s["scalar"] == 0


def test_tensor_e_takes_fp8_and_bf16_as_stored_so_nothing_widens_them():
    weight = torch.empty(SIDE, SIDE, dtype=torch.bfloat16, device="meta")
    for target in (TRN1, TRN2):
        for stored in (torch.float8_e4m3fn, torch.bfloat16):
            assert ops.widening(target, weight, stored).compute_s == 0


def test_an_int8_decode_is_priced_with_the_widening_it_needs(trn1_decodes):
    int8 = trn1_decodes["int8"].forward
    widening = vector_pass_s(TRN1, SIDE * SIDE)
    reading = TRN1.hbm_transfer_s(SIDE * SIDE)   # int8: a byte per element
    # on trn1 VectorE widens int8 slower than the DMA queues read it: the widening bounds the decode ...
    assert widening > reading
    assert int8.total >= widening
    # ... and overlaps the read of the same weights and TensorE's use of them instead of adding to them
    assert int8.total < widening + reading


def test_an_int8_decode_would_be_faster_if_its_widening_were_free(trn1_decodes):
    """What the model gave when the widening was a conversion riding in its neighbour: the weights' read at one
    byte an element, and TensorE, overlapped. The widening must make the decode slower than that."""
    int8, bf16 = trn1_decodes["int8"].forward, trn1_decodes[None].forward
    free_widening = max(TRN1.hbm_transfer_s(SIDE * SIDE), bf16.compute) + bf16.launches
    assert int8.total > 1.5 * free_widening


def test_fp8_reads_half_the_bytes_and_adds_no_engine_work(trn1_decodes):
    bf16, fp8 = trn1_decodes[None], trn1_decodes["fp8"]
    assert fp8.forward.compute == bf16.forward.compute
    assert fp8.forward.total < bf16.forward.total
    assert fp8.parameter_bytes == bf16.parameter_bytes // 2
    # the same holds where TensorE runs fp8 at twice its bf16 rate: a bf16 activation keeps it at the bf16 rate
    assert decode_one_matrix(TRN2, "fp8").forward.compute == decode_one_matrix(TRN2, None).forward.compute


def test_bf16_weights_are_read_as_traced_and_never_widened(trn1_decodes):
    bf16 = trn1_decodes[None]
    assert bf16.graphs.stored == {}
    assert bf16.forward == ops.graph(TRN1, bf16.graphs.forward, bf16.graphs.forward_outputs)
    # the matmul's unit: TensorE overlapping the read of the bf16 weights, two bytes an element
    reading = TRN1.hbm_transfer_s(SIDE * SIDE * 2)
    assert bf16.forward.compute + bf16.forward.memory == pytest.approx(max(reading, bf16.forward.compute), rel=1e-3)


def test_run_eagerly_an_int8_matrix_is_widened_by_an_executable_of_its_own(trn1_decodes):
    bf16, int8 = trn1_decodes[None], trn1_decodes["int8"]
    narrow = torch.empty(SIDE, SIDE, dtype=torch.int8, device="meta")
    wide = torch.empty(SIDE, SIDE, dtype=torch.bfloat16, device="meta")
    widen = ops.launched(TRN1, ops.moved_bytes([narrow], [wide]), ops.widening(TRN1, wide, torch.int8).compute_s)
    assert int8.eager_forward.total == pytest.approx(bf16.eager_forward.total + widen.total)


def test_a_large_int8_decode_is_not_faster_than_its_widening_or_its_weights_predict():
    arch = architecture.from_config({"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 2,
                                     "num_attention_heads": 32, "num_key_value_heads": 8,
                                     "intermediate_size": 14336, "vocab_size": 32000})
    request = plan.Request(mode="decode", batch=1, input_len=128, output_len=16, weights="int8")
    result = run.estimate(arch, TRN1, Layout.make(TRN1, 1, 1, 1, None), request)
    per_layer = 4096 * (4096 + 2 * 1024) + 4096 * 4096 + 3 * 4096 * 14336
    matrix_elements = arch.layers * per_layer + 4096 * 32000   # the layers' matrices and the head's
    assert result["tpot_s"] >= TRN1.hbm_transfer_s(matrix_elements)
    assert result["tpot_s"] >= vector_pass_s(TRN1, matrix_elements)
