"""The cost model (localneuron/costmodel): one table of targets, per-op engine work with the NKI tile
rules, eager ops vs compiled graphs, collectives; and the eager estimate per executable in a real run."""
import pytest
import torch

from localneuron.costmodel import collectives, tiles
from localneuron.costmodel.engines import op_work
from localneuron.costmodel.hardware import CHIPS, NEURON_CORES
from localneuron.costmodel.ops import GraphOp, eager_op, eager_seconds, fused_seconds, graph
from localneuron.nki import generation
from localneuron.ops import tracking
from localneuron.runtime.targets import TARGETS

TRN1, TRN2 = CHIPS["trn1"], CHIPS["trn2"]


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def mm_seconds(chip, m, k, n, dtype=torch.bfloat16):
    return eager_seconds(chip, "aten::mm", [meta(m, k, dtype=dtype), meta(k, n, dtype=dtype)], [meta(m, n, dtype=dtype)])


def test_one_table_serves_the_device_the_cost_model_and_nki():
    assert TARGETS["trn2"] is CHIPS["trn2"] and TARGETS["trn3"] is CHIPS["trn3"]
    assert "trn1" not in TARGETS   # the device simulates TorchNeuron's targets; estimates also know trn1
    assert generation.resolve("trn1") is TRN1.core is NEURON_CORES["gen2"]
    # the device's view: logical cores and HBM per core at the default LNC
    assert (TRN1.logical_cores, TRN1.hbm_bytes_per_core, TRN1.cores_per_instance) == (2, 16 << 30, 32)
    assert (TRN2.logical_cores, TRN2.hbm_bytes_per_core) == (4, 24 << 30)
    # published per-core TensorE peak: 128 x 128 PEs, 2 FLOP, 2.8 GHz on NC-v2
    assert TRN1.core.bf16_flops == pytest.approx(91.75e12, rel=1e-3)
    assert TRN1.memory_bytes_per_s_per_core == pytest.approx(272e9)   # 16 DMA queues x 17 B/ns


def test_large_matmul_is_compute_bound_at_the_published_gemm_efficiency():
    seconds = op_work(TRN1, "aten::mm", [meta(4096, 8192), meta(8192, 8192)], [meta(4096, 8192)]).compute_s
    assert seconds * 1e3 == pytest.approx(6.97, rel=0.05)   # the NKI tutorial's blocked GEMM
    assert mm_seconds(TRN2, 2048, 2048, 2048, torch.float32) > 3 * mm_seconds(TRN2, 2048, 2048, 2048)  # fp32 = 1/4 rate


def test_tiles_round_up_and_small_moving_operands_pay_the_instruction_floor():
    # one more contraction row needs a second partition tile
    assert tiles.gemm_cycles(128, 129, 512, False) == 2 * tiles.gemm_cycles(128, 128, 512, False)
    # one row against a [128, 128] tile still costs the 64-cycle MultiplyMoving floor
    assert tiles.gemm_cycles(1, 128, 128, False) == tiles.MM_INIT_LATENCY


def test_time_grows_with_size():
    sizes = [64, 256, 1024, 4096]
    for chip in (TRN1, TRN2):
        mm = [mm_seconds(chip, s, s, s) for s in sizes]
        add = [eager_seconds(chip, "aten::add", [meta(s, s), meta(s, s)], [meta(s, s)]) for s in sizes]
        assert mm == sorted(mm) and len(set(mm)) == len(mm)
        assert add == sorted(add) and add[-1] > add[0]


def test_elementwise_op_is_memory_bound_and_fallback_pays_the_host_link():
    x = meta(16 << 20, dtype=torch.float32)   # 64 MiB
    device = eager_op(TRN2, "aten::add", [x, x], [x])
    assert device.total == pytest.approx(TRN2.launch_overhead_s + 3 * 64 * 2**20 / TRN2.memory_bytes_per_s_per_core)
    assert device.memory > device.compute
    host = eager_op(TRN2, "aten::add", [x, x], [x], on_host=True)
    assert host.host > 3 * device.total and host.launches == 2 * TRN2.launch_overhead_s


def _chain(n, size):
    """n element-wise ops, each consuming the previous result: x -> relu -> relu ..."""
    ops, previous = [], 0
    for i in range(1, n + 1):
        ops.append(GraphOp("aten::relu", ((previous, meta(size)),), ((i, meta(size)),)))
        previous = i
    return ops


def test_a_compiled_graph_is_cheaper_than_its_ops_launched_one_by_one():
    ops = _chain(8, 4096)
    eager = sum(eager_seconds(TRN2, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs]) for op in ops)
    fused = graph(TRN2, ops, outputs={8})
    assert fused.launches == TRN2.launch_overhead_s
    assert fused.total < eager / 3
    # an intermediate too large for SBUF is spilled: written to HBM and read back
    large = graph(TRN2, _chain(8, 64 << 20), outputs={8})
    small_memory_per_op = graph(TRN2, _chain(8, 1 << 16), outputs={8}).memory / 8
    assert large.memory > 100 * small_memory_per_op
    assert fused_seconds(TRN2, "aten::relu", [meta(4096)], [meta(4096)]) < eager_seconds(
        TRN2, "aten::relu", [meta(4096)], [meta(4096)])


def test_small_dma_descriptors_run_below_the_sustained_rate():
    core = TRN1.core
    efficiency = [core.dma_efficiency(b) for b in (256, 512, 2048, 4096, 65536)]
    assert efficiency == sorted(efficiency) and efficiency[-2:] == [1.0, 1.0]
    assert efficiency[0] < 0.25   # < 256 B is overhead-bound (reference §8.6)
    # a graph input read in one-token descriptors (a KV cache) costs more than the same bytes read in bulk
    cache = meta(1, 2, 8192, 128)
    ops = [GraphOp("aten::cat", ((1, cache), (2, meta(1, 2, 1, 128))), ((3, meta(1, 2, 8193, 128)),))]
    bulk = graph(TRN1, ops, outputs=set())
    token_by_token = graph(TRN1, ops, outputs=set(), descriptor_bytes={1: 2 * 128 * 2})
    assert token_by_token.memory == pytest.approx(bulk.memory / core.dma_efficiency(512), rel=0.01)


def test_collectives_scale_with_bytes_and_ranks():
    for chip in (TRN1, TRN2):
        node = collectives.Group(16, 16)
        times = [collectives.all_reduce(chip, n, node) for n in (1 << 10, 1 << 20, 1 << 26, 1 << 30)]
        assert times == sorted(times) and times[-1] > 100 * times[0]
        ranks = [collectives.all_gather(chip, 1 << 26, collectives.Group(n, n)) for n in (2, 4, 16, 32)]
        assert ranks == sorted(ranks)
        # every core of an instance reducing across instances shares its EFA: slower than NeuronLink
        inside = collectives.all_reduce(chip, 1 << 28, collectives.Group(8, 8))
        across = collectives.all_reduce(chip, 1 << 28, collectives.Group(8, 1))
        shared = collectives.all_reduce(chip, 1 << 28, collectives.Group(8, 1, chip.cores_per_instance))
        assert across < shared and inside < shared
        assert collectives.all_reduce(chip, 1 << 28, collectives.Group(1, 1)) == 0.0
        assert collectives.send_recv(chip, 1 << 20, True) > collectives.send_recv(chip, 1 << 20, False)


def test_small_all_reduce_uses_the_tree_large_the_ring():
    group = collectives.Group(32, 32)
    step = TRN1.core.dma_fixed_latency_ns * 1e-9
    small = collectives.all_reduce(TRN1, 64, group)
    assert small < 2 * 31 * step           # fewer steps than a 32-rank ring
    large = collectives.all_reduce(TRN1, 1 << 30, group)
    ring_bandwidth_term = 2 * 31 / 32 * (1 << 30) / TRN1.neuronlink_bytes_per_s_per_direction
    assert large == pytest.approx(2 * 31 * step + ring_bandwidth_term)


def test_estimates_accumulate_per_call(quiet):
    a = torch.randn(256, 256).to("neuron")
    tracking.clear_op_tracking()
    for _ in range(3):
        a @ a
    per_call = eager_seconds(TRN2, "aten::mm", [a, a], [a])
    assert tracking.estimated_device_seconds()["aten::mm"] == pytest.approx(3 * per_call)
    assert 0 < tracking.estimated_compiled_seconds() < 3 * per_call
