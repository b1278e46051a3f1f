"""The cost model (localneuron/costmodel): one table of targets, per-op engine work with the NKI tile
rules, eager ops vs compiled graphs, collectives; and the eager estimate per executable in a real run."""
import dataclasses

import pytest
import torch

from localneuron.costmodel import assumptions, collectives, stacks, tiles
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
    with stacks.refitted({}):   # the published figure, before a stack's fitted efficiency
        assert TRN1.memory_bytes_per_s_per_core == pytest.approx(272e9)   # 16 DMA queues x 17 B/ns
    assert TRN1.memory_bytes_per_s_per_core == pytest.approx(272e9 * TRN1.efficiencies.hbm)


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
    assert fused_seconds(TRN2, "aten::relu", [meta(4096)], [meta(4096)]) < eager_seconds(
        TRN2, "aten::relu", [meta(4096)], [meta(4096)])


def _seconds(chip, engine, passes, elements):
    return passes * tiles.elementwise_cycles(elements) / (chip.core.clock_ghz[engine] * 1e9) / chip.lnc


def test_a_fused_loop_keeps_its_intermediates_on_chip_however_large():
    # the compiler tiles the chain along its rows: the graph reads x once and writes the result once,
    # and its 8 VectorE passes are one loop
    n = 64 << 20
    large = graph(TRN1, _chain(8, n), outputs={8})
    compute = _seconds(TRN1, "vector", 8, n) + tiles.DEPENDENCY_LATENCY / (TRN1.core.clock_ghz["vector"] * 1e9)
    traffic = 2 * TRN1.hbm_transfer_s(2 * n)   # bf16 in, bf16 out
    assert large.compute == pytest.approx(compute)
    assert large.compute + large.memory == pytest.approx(max(compute, traffic))
    # the same chain launched op by op reads and writes every intermediate
    eager = [eager_op(TRN1, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs]) for op in _chain(8, n)]
    assert all(op.compute + op.memory == pytest.approx(traffic) for op in eager)
    assert sum(op.total for op in eager) > 2 * large.total


def test_engines_of_a_fused_loop_overlap_and_a_matmul_ends_the_loop():
    n = 1 << 20
    x, y = meta(n), meta(n)
    scalar_then_vector = [GraphOp("aten::exp", ((0, x),), ((1, y),)), GraphOp("aten::relu", ((1, y),), ((2, x),))]
    both = graph(TRN2, scalar_then_vector, outputs=set()).compute
    assert both == pytest.approx(max(_seconds(TRN2, "scalar", 1, n), _seconds(TRN2, "vector", 1, n))
                                 + tiles.DEPENDENCY_LATENCY / (TRN2.core.clock_ghz["vector"] * 1e9))
    a, w = meta(1024, 1024), meta(1024, 1024)
    split = [GraphOp("aten::relu", ((0, a),), ((1, a),)), GraphOp("aten::mm", ((1, a), (9, w)), ((2, a),)),
             GraphOp("aten::relu", ((2, a),), ((3, a),))]
    whole = graph(TRN2, split, outputs=set())
    loop = graph(TRN2, split[:1], outputs=set())
    assert whole.compute == pytest.approx(2 * loop.compute + op_work(TRN2, "aten::mm", [a, w], [a]).compute_s
                                          + tiles.DEPENDENCY_LATENCY / (TRN2.core.clock_ghz["tensor"] * 1e9))


def test_a_conversion_rides_along_unless_it_is_all_the_loop_does():
    n = 1 << 22
    wide, narrow = meta(n, dtype=torch.float32), meta(n)
    alone = graph(TRN1, [GraphOp("aten::_to_copy", ((0, wide),), ((1, narrow),))], outputs=set())
    assert alone.compute == pytest.approx(_seconds(TRN1, "vector", 1, n)
                                          + tiles.DEPENDENCY_LATENCY / (TRN1.core.clock_ghz["vector"] * 1e9))
    cast_then_exp = [GraphOp("aten::_to_copy", ((0, wide),), ((1, narrow),)), GraphOp("aten::exp", ((1, narrow),), ((2, narrow),))]
    with_neighbour = graph(TRN1, cast_then_exp, outputs=set())
    exp_alone = graph(TRN1, [GraphOp("aten::exp", ((0, narrow),), ((2, narrow),))], outputs=set())
    assert with_neighbour.compute == pytest.approx(exp_alone.compute)


def test_data_movement_reads_no_more_than_it_writes_and_in_place_results_are_written_once():
    table, ids, rows = meta(128256, 4096), meta(8, dtype=torch.int64), meta(8, 4096)
    lookup = graph(TRN1, [GraphOp("aten::embedding", ((0, table), (1, ids)), ((2, rows),))], outputs={2})
    assert lookup.memory <= 2 * TRN1.hbm_transfer_s(8 * 4096 * 2) + TRN1.core.dma_fixed_latency_ns * 1e-9
    # an optimizer updating a parameter in place three times: read once, written once
    p = meta(1 << 24, dtype=torch.float32)
    updates = [GraphOp("aten::mul_", ((0, p),), ((0, p),)), GraphOp("aten::add_", ((0, p), (1, p)), ((0, p),)),
               GraphOp("aten::mul_", ((0, p),), ((0, p),))]
    once = graph(TRN1, updates, outputs={0})
    traffic = 3 * TRN1.hbm_transfer_s(4 << 24)   # p and the gradient read, p written
    assert once.compute + once.memory == pytest.approx(max(once.compute, traffic))


def test_small_dma_descriptors_run_below_the_sustained_rate():
    core = TRN1.core
    efficiency = [core.dma_efficiency(b) for b in (256, 512, 2048, 4096, 65536)]
    assert efficiency == sorted(efficiency) and efficiency[-2:] == [1.0, 1.0]
    # < 256 B is overhead-bound: the NKI DMA bandwidth guide's efficiency table,
    # https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-dma-bandwidth-guide.html
    assert efficiency[0] < 0.25
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


def test_small_all_reduce_uses_halving_doubling_large_the_ring():
    group = collectives.Group(32, 32)
    step = assumptions.COLLECTIVE_STEP_S
    start = assumptions.COLLECTIVE_START_S
    small = collectives.all_reduce(TRN1, 64, group)   # recursive doubling: log2(32) whole-buffer exchanges
    assert small == pytest.approx(start + 5 * (step + 64 / TRN1.neuronlink_bytes_per_s_per_direction))
    large = collectives.all_reduce(TRN1, 1 << 30, group)
    ring_bandwidth_term = 2 * 31 / 32 * (1 << 30) / TRN1.neuronlink_bytes_per_s_per_direction
    assert large == pytest.approx(start + 2 * 31 * step + ring_bandwidth_term)


def test_a_collective_on_its_own_pays_a_launch_one_in_a_graph_does_not():
    inside = collectives.all_reduce(TRN1, 1024, collectives.Group(2, 2))
    assert collectives.c10d_seconds(TRN1, "all_reduce", 1024, 2) == pytest.approx(
        assumptions.COLLECTIVE_LAUNCH_S + inside)
    assert collectives.c10d_seconds(TRN1, "all_reduce", 1024, 1) == 0.0


def test_across_instances_an_all_reduce_is_hierarchical():
    # 64 ranks on two trn1 instances: reduce-scatter inside each, the shares across EFA, all-gather inside
    nbytes = 1 << 27
    group = collectives.Group(64, 32)
    inside = collectives.Group(32, 32)
    efa = 2 * (assumptions.COLLECTIVE_STEP_S + assumptions.EFA_LATENCY_S) + 2 * 0.5 * nbytes / TRN1.efa_bytes_per_s
    start = assumptions.COLLECTIVE_START_S   # one collective: started once, not once per phase
    expected = start + 2 * (collectives.all_gather(TRN1, nbytes, inside) - start) + efa
    assert collectives.all_reduce(TRN1, nbytes, group) == pytest.approx(expected)
    # every group crossing the instance at once shares its EFA
    assert collectives.all_reduce(TRN1, nbytes, collectives.Group(64, 32, concurrent_groups=4)) > expected


def test_estimates_accumulate_per_call(quiet):
    a = torch.randn(256, 256).to("neuron")
    tracking.clear_op_tracking()
    for _ in range(3):
        a @ a
    per_call = eager_seconds(TRN2, "aten::mm", [a, a], [a])
    assert tracking.estimated_device_seconds()["aten::mm"] == pytest.approx(3 * per_call)
    assert 0 < tracking.estimated_compiled_seconds() < 3 * per_call


# --- KangaRing on a whole trn2 instance (issue 33): the algorithm AWS documents for large collectives among every
# rank of an instance's chips, priced exactly (collectives.kangaring()); elsewhere the ring and recursive doubling as
# before. https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/explore/intranode-collective-comm.html
STEP, START = 2e-6, 10e-6
PROMPT = 10048 * 8192 * 2   # a 70B TP64 prompt's hidden states, bf16: what each sequence-parallel collective moves


@pytest.fixture
def kangaring_latencies(monkeypatch):
    monkeypatch.setattr(assumptions, "COLLECTIVE_STEP_S", STEP)
    monkeypatch.setattr(assumptions, "COLLECTIVE_START_S", START)


def test_whole_instance_all_gather_and_reduce_scatter_are_kangaring_bound_by_hbm(kangaring_latencies):
    group = collectives.Group(64, 64)
    share = 63 / 64 * PROMPT
    # the 4 links of a chip each carry a quarter of it (two disjoint Hamiltonian cycles, both directions)...
    links = share / (4 * 160e9)
    # ...but the chip's 4 ranks touch HBM 1.5 (all-gather) or 2 (reduce-scatter) times a chunk, at 2.9 TB/s
    gather_hbm, scatter_hbm = 4 * 1.5 * share / 2.9e12, 4 * 2 * share / 2.9e12
    assert links < gather_hbm < scatter_hbm
    assert collectives.all_gather(TRN2, PROMPT, group) == pytest.approx(START + 32 * STEP + gather_hbm)
    assert collectives.reduce_scatter(TRN2, PROMPT, group) == pytest.approx(START + 32 * STEP + scatter_hbm)
    assert collectives.all_reduce(TRN2, PROMPT, group) == pytest.approx(
        START + 2 * 32 * STEP + gather_hbm + scatter_hbm)
    # 0.41 ms, where a ring over one link per direction takes 1.15 ms
    ring = START + 63 * STEP + share / 160e9
    assert collectives.all_gather(TRN2, PROMPT, group) == pytest.approx(409.3e-6, rel=1e-3)
    assert ring == pytest.approx(1148.9e-6, rel=1e-3)


def test_kangaring_only_above_the_size_the_runtime_takes_it_from(kangaring_latencies):
    """The page's empirical ranges: KangaRing above 56 MB (below it mesh and recursive doubling-halving, which the
    model's ring and recursive doubling stand for)."""
    group, mid = collectives.Group(64, 64), 4096 * 5120 * 2   # a 4,096-token prompt of hidden 5,120: 42 MB
    assert collectives.kangaring(TRN2, "all_gather", mid, 64) is None
    assert collectives.kangaring(TRN2, "all_gather", 56 * 2 ** 20, 64) is None
    assert collectives.kangaring(TRN2, "all_gather", 56 * 2 ** 20 + 1, 64) is not None
    assert collectives.all_gather(TRN2, mid, group) == pytest.approx(START + 63 * STEP + 63 / 64 * mid / 160e9)


def test_small_collectives_keep_recursive_doubling(kangaring_latencies):
    nbytes = 1 << 20
    assert collectives.all_reduce(TRN2, nbytes, collectives.Group(64, 64)) == pytest.approx(
        START + 6 * (STEP + nbytes / 160e9))


@pytest.mark.parametrize("target, ranks", [(TRN1, 32), (TRN2, 32), (TRN2, 16), (dataclasses.replace(TRN2, lnc=1), 128)])
def test_kangaring_only_for_every_lnc2_rank_of_the_instance(kangaring_latencies, target, ranks):
    """trn1 (two LNC=1 ranks a chip), part of a trn2 instance, or trn2 at LNC=1: the ring over one link per
    direction, as before."""
    assert collectives.kangaring(target, "all_gather", PROMPT, ranks) is None
    bandwidth = target.neuronlink_bytes_per_s_per_direction
    assert collectives.all_gather(target, PROMPT, collectives.Group(ranks, ranks)) == pytest.approx(
        START + (ranks - 1) * STEP + (ranks - 1) / ranks * PROMPT / bandwidth)


def test_across_instances_the_inside_stages_take_kangaring(kangaring_latencies):
    group, inside = collectives.Group(128, 64), collectives.Group(64, 64)
    efa = collectives._across(TRN2, PROMPT, group, 2)
    assert collectives.all_reduce(TRN2, PROMPT, group) == pytest.approx(
        collectives.all_reduce(TRN2, PROMPT, inside) + efa)
