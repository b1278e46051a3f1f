"""The cycle model: published cost rules, engine concurrency, dependencies, calibration.

These assert on the model's estimates (deterministic numbers), never on wall-clock time.
"""
import sys
from pathlib import Path

import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "nki"))


def estimate(kernel, *shapes):
    return nki.benchmark(kernel, numerics=False)(*[nki.ShapeOnly(s, d) for s, d in shapes])


@pytest.fixture(autouse=True)
def gen3(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen3")


def test_dma_of_32_kib_on_one_queue_takes_about_1_4_us():
    # Published: one DMA engine moved 32 KiB HBM -> SBUF in 1,416 ns (about 23 B/ns) on Trn2.
    def load(a):
        nisa.dma_copy(dst=nl.ndarray((8, 1024), nl.float32, buffer=nl.sbuf), src=a)
    report = estimate(load, ((8, 1024), "float32"))
    assert report.latency_ns == pytest.approx(1416, rel=0.05)


def test_dependent_one_element_scalar_instructions_issue_every_189_ns_on_gen2(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen2")

    def chain(a):
        tile = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        for _ in range(100):
            nisa.activation(dst=tile, op=nl.exp, data=tile)
    one = estimate(chain, ((1,), "float32"))
    assert one.latency_ns / 100 == pytest.approx(189, rel=0.03)
    assert one.bottleneck == "scalar"


def test_matmul_costs_follow_moving_size_and_fp32_is_four_times_slower():
    def matmuls(a, dtype, n):
        stationary = nl.ndarray((128, 128), dtype, buffer=nl.sbuf)
        moving = nl.ndarray((128, n), dtype, buffer=nl.sbuf)
        for _ in range(64):
            nisa.nc_matmul(dst=nl.ndarray((128, n), nl.float32, buffer=nl.psum), stationary=stationary, moving=moving)
    busy = {(d, n): estimate(lambda a: matmuls(a, getattr(nl, d), n), ((1,), "float32")).engine_busy_ns["tensor"]
            for d in ("bfloat16", "float32") for n in (32, 512)}
    clock = 2.4
    assert busy["bfloat16", 512] == pytest.approx(64 * 512 / clock)
    assert busy["bfloat16", 32] == pytest.approx(64 * 64 / clock)          # 64-cycle floor per matmul
    assert busy["float32", 512] == pytest.approx(4 * busy["bfloat16", 512])


def test_vector_tensor_tensor_is_twice_as_fast_with_a_psum_operand():
    def add(a, in_psum):
        x = nl.ndarray((128, 2048), nl.float32, buffer=nl.psum if in_psum else nl.sbuf)
        y = nl.ndarray((128, 2048), nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=y, data1=x, data2=y, op=nl.add)
    sbuf = estimate(lambda a: add(a, False), ((1,), "float32")).engine_busy_ns["vector"]
    psum = estimate(lambda a: add(a, True), ((1,), "float32")).engine_busy_ns["vector"]
    assert sbuf == pytest.approx(2 * psum) and psum == pytest.approx(2048 / 0.96)


def test_independent_engines_overlap_and_dependencies_serialise():
    def independent(a):
        for _ in range(20):
            nisa.activation(dst=nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf), op=nl.exp,
                            data=nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf))
            nisa.memset(dst=nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf), value=0.0)
    report = estimate(independent, ((1,), "float32"))
    busy = report.engine_busy_ns
    assert report.latency_ns < 0.7 * (busy["scalar"] + busy["vector"])

    def dependent(a):
        tile = nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf)
        for _ in range(20):
            nisa.activation(dst=tile, op=nl.exp, data=tile)
            nisa.tensor_scalar(dst=tile, data=tile, op0=nl.multiply, operand0=0.5)
    chained = estimate(dependent, ((1,), "float32"))
    assert chained.latency_ns > chained.engine_busy_ns["scalar"] + chained.engine_busy_ns["vector"]


def test_reallocating_buffers_pipelines_loads_while_reuse_waits():
    def stream(a, reuse):
        shared = nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf)
        for i in range(16):
            tile = shared if reuse else nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=tile, src=a[i * 128:(i + 1) * 128])
            nisa.activation(dst=nl.ndarray((128, 1024), nl.float32, buffer=nl.sbuf), op=nl.exp, data=tile)
    fresh = estimate(lambda a: stream(a, False), ((2048, 1024), "float32"))
    reused = estimate(lambda a: stream(a, True), ((2048, 1024), "float32"))
    assert fresh.latency_ns < 0.8 * reused.latency_ns


def test_timing_only_run_matches_the_numerics_run_and_names_the_bottleneck():
    from tensor_add import tensor_add
    a = np.ones((256, 1024), dtype=np.float32)
    full = nki.benchmark(tensor_add)(a, a)
    shapes = nki.benchmark(tensor_add, numerics=False)(nki.ShapeOnly(a.shape), nki.ShapeOnly(a.shape))
    assert full.latency_ns == shapes.latency_ns and full.bottleneck == "dma"
    assert "bottleneck dma" in full.summary()


def test_kernel_calls_are_recorded_for_the_portability_report():
    from tensor_add import tensor_add
    nki.clear_kernel_calls()
    a = np.ones((128, 512), dtype=np.float32)
    tensor_add(a, a)
    calls = nki.kernel_calls()
    assert [c["name"] for c in calls] == ["tensor_add"]
    assert calls[0]["estimated_ns"] > 0 and calls[0]["bottleneck"] == "dma" and calls[0]["target"] == "gen3"
    nki.clear_kernel_calls()
    assert nki.kernel_calls() == []


def test_trn1_bf16_gemm_calibration(monkeypatch):
    """Published: 6.97 ms blocked (85% of peak), 51.80 ms naive tiled, for [4096,8192]@[8192,8192]."""
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen2")
    from matmul import matmul_blocked, matmul_naive
    shapes = (((8192, 4096), "bfloat16"), ((8192, 8192), "bfloat16"))
    blocked = estimate(matmul_blocked, *shapes)
    naive = estimate(matmul_naive, *shapes)
    assert blocked.latency_ms == pytest.approx(6.97, rel=0.25)
    assert blocked.bottleneck == "tensor" and naive.bottleneck == "dma"
    assert naive.latency_ms / blocked.latency_ms > 4


def test_portability_report_section_lists_kernels_with_estimated_time():
    from tensor_add import tensor_add
    from localneuron.nki import report
    nki.clear_kernel_calls()
    a = np.ones((128, 512), dtype=np.float32)
    for _ in range(3):
        tensor_add(a, a)
    data = report.collect()
    assert data["calls"] == 3 and data["kernels"]["tensor_add"]["calls"] == 3
    assert data["kernels"]["tensor_add"]["bottleneck"] == "dma"
    text = "\n".join(report.render(data))
    assert "NKI kernels: 3 calls" in text and "tensor_add" in text and "bottleneck dma" in text
    nki.clear_kernel_calls()
    assert report.render(report.collect()) == ["NKI kernels: none called"]


def test_strides_above_16_bytes_halve_engine_port_bandwidth():
    def copy(a, step):
        src = nl.ndarray((128, 2048), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=nl.ndarray((128, 2048 // step), nl.float32, buffer=nl.sbuf), src=src[:, ::step])
    per_element = {step: estimate(lambda a: copy(a, step), ((1,), "float32")).engine_busy_ns["vector"] / (2048 // step)
                   for step in (1, 4, 8)}
    assert per_element[4] == pytest.approx(per_element[1])        # 16-byte stride: full bandwidth
    assert per_element[8] == pytest.approx(2 * per_element[1])    # 32-byte stride: half


def test_benchmark_trace_gives_a_per_engine_timeline():
    from softmax import softmax_rows
    report = nki.benchmark(softmax_rows, trace=True)(np.ones((128, 512), dtype=np.float32))
    events = report.trace_events()
    assert {e["tid"] for e in events} == {"dma", "vector", "scalar"}
    assert [e["name"] for e in events if e["tid"] == "scalar"] == ["activation", "activation"]
    assert max(e["ts"] + e["dur"] for e in events) <= report.latency_us


@pytest.mark.parametrize("target, psum_overlap", [("gen2", False), ("gen3", True)])
def test_port_conflicts_serialise_engines_sharing_a_port(target, psum_overlap, monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", target)

    def vector_and_scalar_on_psum(a, same_bank):
        banks = [nl.ndarray((128, 512), nl.float32, buffer=nl.psum) for _ in range(2)]
        other = banks[0] if same_bank else banks[1]
        for _ in range(8):
            nisa.tensor_copy(dst=nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf), src=banks[0])
            nisa.activation(dst=nl.ndarray((128, 512), nl.float32, buffer=nl.sbuf), op=nl.exp, data=other)

    def overlapped(report):
        return report.latency_ns < 0.8 * (report.engine_busy_ns["vector"] + report.engine_busy_ns["scalar"])
    same = estimate(lambda a: vector_and_scalar_on_psum(a, True), ((1,), "float32"))
    different = estimate(lambda a: vector_and_scalar_on_psum(a, False), ((1,), "float32"))
    assert not overlapped(same)                       # one PSUM bank: never concurrent
    assert overlapped(different) == psum_overlap      # gen2 shares the whole PSUM port


def test_large_hbm_to_hbm_copies_use_every_dma_queue():
    def copy(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out
    report = estimate(copy, ((1 << 22,), "float32"))              # 16 MiB
    assert report.engine_busy_ns["dma"] == pytest.approx(report.latency_ns)
    bandwidth = (1 << 24) / report.latency_ns                      # bytes per ns over 16 queues
    assert 16 * 23 * 0.9 < bandwidth < 16 * 27.2
