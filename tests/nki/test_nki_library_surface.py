"""The NKI surface AWS's NKI Library uses: dtypes as numpy sees them, packed MX types, the ISA instructions
the library calls, the two cores of kernel[2], collectives, registers and the Neuron 2.34 legacy namespace.
Each result is compared with numpy computed independently of the simulator."""
import subprocess
import sys

import numpy as np
import pytest

import nki
import nki.collectives as ncc
import nki.isa as nisa
import nki.language as nl

ml_dtypes = pytest.importorskip("ml_dtypes", reason="NKI dtypes beyond numpy's need ml_dtypes (pip install ml_dtypes)")


@pytest.fixture
def gen4(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen4")


# --- data types ------------------------------------------------------------------------------------

def test_dtypes_are_what_numpy_and_library_code_compare_with():
    assert str(nl.float32) == "float32" and str(nl.bfloat16) == "bfloat16"
    assert nl.float32 == np.float32 and np.float32 == nl.float32 and nl.float32 == "float32"
    assert np.dtype("bfloat16") == nl.bfloat16 and nl.bfloat16 == np.dtype(ml_dtypes.bfloat16)
    assert np.zeros(3, dtype=nl.bfloat16).dtype == ml_dtypes.bfloat16
    assert np.ones(2, np.float32).astype(nl.float8_e4m3).dtype.name == "float8_e4m3"
    assert nl.bfloat16 != nl.float16 and nl.float8_e4m3 != nl.float8_e4m3fn
    assert np.dtype("bfloat16") in (nl.tfloat32, nl.bfloat16) and np.float32 not in (nl.bfloat16, nl.int32)
    assert nl.bool is nl.bool_ and getattr(nl, str(nl.bfloat16)) is nl.bfloat16
    assert {nl.float32: 1}["float32"] == 1


@pytest.mark.parametrize("dtype, limit, bits", [(nl.float8_e4m3fn_x4, 448.0, 8), (nl.float8_e5m2_x4, 57344.0, 8),
                                                (nl.float4_e2m1fn_x4, 6.0, 4)])
def test_packed_mx_items_hold_four_elements_lowest_bits_first_and_saturate(dtype, limit, bits):
    from localneuron.nki.dtypes import static_cast
    values = np.array([[1.0, -2.0, 0.5, 3.0, 1e9, -1e9, 0.0, 1.5]], np.float32)
    packed = static_cast(values, dtype)
    assert packed.shape == (1, 2) and packed.dtype.itemsize == 4 * bits // 8 and packed.dtype == dtype
    back = static_cast(packed, np.float32)
    np.testing.assert_array_equal(back, [[1.0, -2.0, 0.5, 3.0, limit, -limit, 0.0, 1.5]])
    raw = packed.view(np.uint32 if bits == 8 else np.uint16)[0, 0]
    element = getattr(ml_dtypes, dtype.element.name)
    assert (int(raw) & ((1 << bits) - 1)) == int(np.array([1.0], element).view(np.uint8)[0]) & ((1 << bits) - 1)


def test_static_cast_rounds_to_nearest_even_and_truncates_to_integers():
    from localneuron.nki.dtypes import static_cast
    np.testing.assert_array_equal(static_cast(np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8]), nl.bfloat16).astype(np.float32),
                                  [1.0, 1 + 2 ** -6])
    np.testing.assert_array_equal(static_cast(np.array([2.7, -2.7]), nl.int32), [2, -2])


# --- instructions ------------------------------------------------------------------------------------

def _run(kernel, *arrays, lnc=1):
    return nki.cpu_simulate(kernel)[lnc](*arrays)


def _tile_kernel(body, out_shape, out_dtype=nl.float32):
    @nki.jit
    def kernel(a):
        x = nl.ndarray(a.shape, a.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=x, src=a)
        result = nl.ndarray(out_shape, out_dtype, buffer=nl.sbuf)
        body(result, x)
        out = nl.ndarray(out_shape, out_dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=result)
        return out
    return kernel


def test_tensor_tensor_scan_is_a_running_sum_with_an_initial_carry():
    x = np.random.default_rng(0).standard_normal((4, 37)).astype(np.float32)

    def body(dst, src):
        ones = nl.ndarray(src.shape, nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=ones, value=1.0)
        init = nl.ndarray((4, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=init, value=2.0)
        nisa.tensor_tensor_scan(dst=dst, data0=ones, data1=src, initial=init, op0=nl.multiply, op1=nl.add)
    np.testing.assert_allclose(_run(_tile_kernel(body, x.shape), x), 2.0 + np.cumsum(x, axis=1), rtol=1e-5, atol=1e-5)


def test_bn_stats_then_bn_aggr_give_mean_and_population_variance_over_several_tiles():
    x = np.random.default_rng(1).standard_normal((8, 1000)).astype(np.float32) * 3 + 1

    def body(dst, src):
        stats = nl.ndarray((8, 12), nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=stats[:, 0:6], data=src[:, 0:500])
        nisa.bn_stats(dst=stats[:, 6:12], data=src[:, 500:1000])
        nisa.bn_aggr(dst=dst, data=stats)
    got = _run(_tile_kernel(body, (8, 2)), x)
    np.testing.assert_allclose(got[:, 0], x.mean(axis=1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[:, 1], x.var(axis=1), rtol=1e-4)


def test_bn_stats_refuses_more_than_512_elements_per_partition():
    x = np.ones((2, 513), np.float32)
    with pytest.raises(AssertionError, match="at most 512"):
        _run(_tile_kernel(lambda d, s: nisa.bn_stats(dst=d, data=s), (2, 6)), x)


def test_max8_find_index8_and_match_replace8_find_the_top_eight():
    x = np.random.default_rng(2).permutation(64 * 3).reshape(3, 64).astype(np.float32)
    top = -np.sort(-x, axis=1)[:, :8]

    def body(dst, src):
        values = nl.ndarray((3, 8), nl.float32, buffer=nl.sbuf)
        nisa.max8(dst=values, src=src)
        index = nl.ndarray((3, 8), nl.uint32, buffer=nl.sbuf)
        nisa.nc_find_index8(dst=index, data=src, vals=values)
        replaced = nl.ndarray(src.shape, nl.float32, buffer=nl.sbuf)
        nisa.nc_match_replace8(dst=replaced, data=src, vals=values, imm=-1.0)
        nisa.tensor_copy(dst=dst[:, 0:8], src=values)
        nisa.tensor_copy(dst=dst[:, 8:16], src=index)
        nisa.tensor_copy(dst=dst[:, 16:80], src=replaced)
    got = _run(_tile_kernel(body, (3, 80)), x)
    np.testing.assert_array_equal(got[:, :8], top)
    np.testing.assert_array_equal(got[:, 8:16], np.argsort(-x, axis=1, kind="stable")[:, :8])
    expected = np.where(x >= top[:, 7:8], -1.0, x)
    np.testing.assert_array_equal(got[:, 16:], expected)


def test_range_select_keeps_a_per_partition_index_window_and_reduces_its_max():
    x = np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32)
    low, high = np.array([0, 3, 5, 10], np.float32), np.array([4, 9, 6, 16], np.float32)

    @nki.jit
    def kernel(a, lo, hi):
        src = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=src, src=a)
        bounds = [nl.ndarray((4, 1), nl.float32, buffer=nl.sbuf) for _ in range(2)]
        nisa.dma_copy(dst=bounds[0], src=lo)
        nisa.dma_copy(dst=bounds[1], src=hi)
        kept = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        best = nl.ndarray((4, 1), nl.float32, buffer=nl.sbuf)
        nisa.range_select(dst=kept, on_true_tile=src, comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=bounds[0], bound1=bounds[1], on_false_value=-9.0, reduce_res=best,
                          reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=nl.maximum, range_start=0)
        out = nl.ndarray((4, 17), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[:, 0:16], src=kept)
        nisa.dma_copy(dst=out[:, 16:17], src=best)
        return out
    got = _run(kernel, x, low.reshape(4, 1), high.reshape(4, 1))
    j = np.arange(16)[None, :]
    expected = np.where((j >= low[:, None]) & (j < high[:, None]), x, -9.0)
    np.testing.assert_array_equal(got[:, :16], expected)
    np.testing.assert_array_equal(got[:, 16], expected.max(axis=1))


def test_stream_shuffle_moves_partitions_within_each_quadrant():
    x = np.arange(128 * 2, dtype=np.float32).reshape(128, 2)
    mask = [16] + [255] * 31

    def body(dst, src):
        nisa.tensor_copy(dst=dst, src=src)
        nisa.nc_stream_shuffle(dst=dst, src=src, shuffle_mask=mask)
    got = _run(_tile_kernel(body, x.shape), x)
    expected = x.copy()
    for q in range(4):
        expected[32 * q] = x[32 * q + 16]
    np.testing.assert_array_equal(got, expected)


def test_nonzero_with_count_lists_indices_then_padding_then_the_count():
    x = np.array([[0, 3, 0, 5, 7, 0], [0, 0, 0, 0, 0, 0]], np.float32)
    got = _run(_tile_kernel(lambda d, s: nisa.nonzero_with_count(dst=d, src=s, index_offset=10, padding_val=-1),
                            (2, 7), nl.int32), x)
    np.testing.assert_array_equal(got, [[11, 13, 14, -1, -1, -1, 3], [-1] * 6 + [0]])


def test_dma_transpose_and_dma_compute():
    a = np.arange(6 * 10, dtype=np.float32).reshape(6, 10)

    @nki.jit
    def kernel(x, y):
        t = nl.ndarray((10, 6), nl.float32, buffer=nl.sbuf)
        nisa.dma_transpose(dst=t, src=x)
        total = nl.ndarray((6, 10), nl.float32, buffer=nl.sbuf)
        nisa.dma_compute(dst=total, srcs=[x, y], scales=[2.0, -1.0], reduce_op=nl.add)
        out_t = nl.ndarray((10, 6), nl.float32, buffer=nl.shared_hbm)
        out_s = nl.ndarray((6, 10), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out_t, src=t)
        nisa.dma_copy(dst=out_s, src=total)
        return out_t, out_s
    transposed, combined = _run(kernel, a, a + 1)
    np.testing.assert_array_equal(transposed, a.T)
    np.testing.assert_array_equal(combined, 2 * a - (a + 1))


def test_registers_bound_dynamic_loops():
    @nki.jit
    def kernel(count):
        c = nl.ndarray((1, 1), nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=c, src=count)
        reg = nisa.register_alloc()
        nisa.register_load(reg, c)
        acc = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for _ in nl.dynamic_range(0, reg):
            nisa.tensor_scalar(dst=acc, data=acc, op0=nl.add, operand0=1.0)
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=acc)
        return out
    assert _run(kernel, np.array([[7]], np.int32))[0, 0] == 7


# --- MX on gen4 ---------------------------------------------------------------------------------------

def _mx_reference(x, dtype):
    """Independent MX quantisation: per 8x4 group, scale = max float32 exponent - emax(element)."""
    emax = {"float8_e4m3fn_x4": 8, "float8_e5m2_x4": 15, "float4_e2m1fn_x4": 2}[str(dtype)]
    p, f = x.shape
    exponent = np.floor(np.log2(np.abs(x).clip(np.finfo(np.float32).tiny)))
    scale = exponent.reshape(p // 8, 8, f // 4, 4).max(axis=(1, 3)) + 127 - emax
    return scale.astype(np.uint8)


def test_quantize_mx_then_matmul_mx_match_the_dequantised_matmul(gen4):
    rng = np.random.default_rng(4)
    k, m, n = 32, 16, 8           # 4 * k = 128 contracted values
    a = rng.standard_normal((k, 4 * m)).astype(np.float32)
    b = rng.standard_normal((k, 4 * n)).astype(np.float32)

    @nki.jit
    def kernel(x, y):
        tiles = []
        for src, cols in ((x, m), (y, n)):
            t = nl.ndarray(src.shape, nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=src)
            q = nl.ndarray((k, cols), nl.float8_e4m3fn_x4, buffer=nl.sbuf)
            s = nl.ndarray((k, cols), nl.uint8, buffer=nl.sbuf)
            nisa.quantize_mx(dst=q, src=t, dst_scale=s)
            tiles.append((q, s))
        acc = nl.ndarray((m, n), nl.float32, buffer=nl.psum)
        nisa.nc_matmul_mx(dst=acc, stationary=tiles[0][0], moving=tiles[1][0], stationary_scale=tiles[0][1],
                          moving_scale=tiles[1][1])
        res = nl.ndarray((m, n), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=res, src=acc)
        out = nl.ndarray((m, n), nl.float32, buffer=nl.shared_hbm)
        scales = nl.ndarray((k, m), nl.uint8, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=res)
        nisa.dma_copy(dst=scales, src=tiles[0][1])
        return out, scales
    got, scales = _run(kernel, a, b)
    expected_scale = _mx_reference(a, nl.float8_e4m3fn_x4)
    np.testing.assert_array_equal(scales[[0, 1, 2, 3]], expected_scale)   # groups 0-3 in partitions 0-3
    # dequantise independently: a / 2^(scale - 127), saturated to e4m3fn's 448 (OCP MX), rounded, multiplied back
    def dequant(x, scale):
        factor = np.repeat(np.repeat(np.exp2(scale.astype(np.float64) - 127), 8, axis=0), 4, axis=1)
        return (np.clip(x / factor, -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(np.float64) * factor)
    da, db = dequant(a, expected_scale), dequant(b, _mx_reference(b, nl.float8_e4m3fn_x4))
    expected = np.einsum("kmq,knq->mn", da.reshape(k, m, 4), db.reshape(k, n, 4))
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-4)


def test_mx_instructions_need_gen4(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen3")

    def body(dst, src):
        scale = nl.ndarray((8, 1), nl.uint8, buffer=nl.sbuf)
        nisa.quantize_mx(dst=dst, src=src, dst_scale=scale)
    with pytest.raises(AssertionError, match="NeuronCore-v4"):
        _run(_tile_kernel(body, (8, 1), nl.float8_e4m3fn_x4), np.ones((8, 4), np.float32))


# --- the two cores of kernel[2] -----------------------------------------------------------------------

def test_sendrecv_swaps_tiles_between_the_cores_and_core_barrier_orders_hbm_writes():
    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)

    @nki.jit
    def kernel(a):
        me = nl.program_id(0)
        mine = nl.ndarray((4, 3), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=mine, src=a[me])
        theirs = nl.ndarray((4, 3), nl.float32, buffer=nl.sbuf)
        nisa.sendrecv(src=mine, dst=theirs, send_to_rank=1 - me, recv_from_rank=1 - me, pipe_id=0)
        out = nl.ndarray((2, 4, 3), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[me], src=theirs)
        nisa.core_barrier(out, (0, 1))
        seen = nl.ndarray((4, 3), nl.float32, buffer=nl.sbuf)   # the other core's write, after the barrier
        nisa.dma_copy(dst=seen, src=out[1 - me])
        both = nl.ndarray((2, 4, 3), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=both[me], src=seen)
        return out, both
    out, both = _run(kernel, x, lnc=2)
    np.testing.assert_array_equal(out, x[::-1])
    np.testing.assert_array_equal(both, x)


def test_a_core_waiting_for_data_the_other_never_sends_is_reported_not_hung():
    @nki.jit
    def kernel(a):
        t = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        if nl.program_id(0) == 0:
            nisa.sendrecv(src=t, dst=t, send_to_rank=1, recv_from_rank=1, pipe_id=0)
        out = nl.ndarray((1, 1), nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out
    with pytest.raises(TypeError, match="core 0 waits for sendrecv data from core 1"):
        _run(kernel, np.ones((1, 1), np.float32), lnc=2)


def test_sendrecv_needs_both_cores():
    @nki.jit
    def kernel(a):
        t = nl.ndarray((1, 1), nl.float32, buffer=nl.sbuf)
        nisa.sendrecv(src=t, dst=t, send_to_rank=0, recv_from_rank=0, pipe_id=0)
        return a
    with pytest.raises(TypeError, match=r"kernel\[2\]"):
        _run(kernel, np.ones((1, 1), np.float32))


# --- collectives ----------------------------------------------------------------------------------------

def _collective_kernel(call):
    @nki.jit
    def kernel(a):
        src = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        dst = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=src, src=a)
        call(dst, src)
        return dst
    return kernel


def test_single_rank_collectives_return_the_rank_own_data():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    group = ncc.ReplicaGroup([[0]])
    for call in (lambda d, s: ncc.all_reduce(dsts=[d], srcs=[s], op=nl.add, replica_group=group),
                 lambda d, s: ncc.all_gather(dsts=[d], srcs=[s], replica_group=group, collective_dim=0)):
        np.testing.assert_array_equal(_run(_collective_kernel(call), x), x)


def test_collectives_over_other_ranks_say_one_launch_is_one_rank():
    call = (lambda d, s: ncc.all_reduce(dsts=[d], srcs=[s], op=nl.add, replica_group=ncc.ReplicaGroup([[0, 1]])))
    with pytest.raises(TypeError, match=r"over ranks \[0, 1\] needs those ranks"):
        _run(_collective_kernel(call), np.ones((2, 2), np.float32))


# --- names and modules ------------------------------------------------------------------------------------

def test_every_public_module_is_one_module_under_both_names():
    import localneuron.nki.isa.constants as constants
    import nki.isa.constants
    import nki.language.dtypes
    import nki.typing  # noqa: F401
    assert nki.isa.constants is constants and nisa.oob_mode is constants.oob_mode
    assert nki.language.dtypes.bfloat16 is nl.bfloat16 and nki.dtype.float8_e4m3 is nl.float8_e4m3
    assert nisa.vector_engine is nisa.engine.vector and nki.cpu_simulate is nki.simulate
    assert issubclass(type("Config", (nl.NKIObject,), {}), nl.NKIObject)


@pytest.mark.parametrize("statement", ["import neuronxcc.nki", "from neuronxcc import nki",
                                       "import neuronxcc.nki.language as nl"])
def test_the_removed_neuronxcc_nki_namespace_gives_the_2_34_error_and_the_migration(statement):
    run = subprocess.run([sys.executable, "-c", statement], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0
    assert "Neuron 2.34 removed the deprecated neuronxcc.nki namespace" in run.stderr
    assert "import nki.language as nl" in run.stderr


def test_census_finds_no_missing_name_the_library_uses():
    from localneuron.nki import library_tree
    root = library_tree.find()
    if root is None:
        pytest.skip(f"AWS's NKI Library tree is absent; fetch it with: {library_tree.FETCH_COMMAND}")
    census = subprocess.run([sys.executable, "scripts/nki_library_census.py", "--missing", str(root)],
                            capture_output=True, text=True, timeout=300)
    missing = [line for line in census.stdout.splitlines() if "MISSING" in line]
    # nki.compiler.frontend/ncc_driver are AWS's compiler, used only by the library's compile-mode unit test
    assert all(".compiler." in line for line in missing), census.stdout
