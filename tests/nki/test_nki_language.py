"""nl-level numerics against numpy/torch: element-wise math, reductions, fused helpers, matmul."""
import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl

rng = np.random.default_rng(0)


def run_unary(fn, x):
    @nki.jit
    def kernel(a):
        result = fn(nl.load(a))
        out = nl.ndarray(result.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, result)
        return out
    return nki.simulate(kernel)(x)


def run_binary(fn, x, y):
    @nki.jit
    def kernel(a, b):
        result = fn(nl.load(a), nl.load(b))
        out = nl.ndarray(result.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, result)
        return out
    return nki.simulate(kernel)(x, y)


X = rng.standard_normal((128, 256)).astype(np.float32)
Y = rng.standard_normal((128, 256)).astype(np.float32)


@pytest.mark.parametrize("name, reference", [
    ("add", np.add), ("subtract", np.subtract), ("multiply", np.multiply), ("maximum", np.maximum),
    ("minimum", np.minimum), ("divide", np.divide),
    ("greater", lambda a, b: (a > b).astype(np.float32)), ("equal", lambda a, b: (a == b).astype(np.float32)),
])
def test_binary_math_matches_numpy(name, reference):
    np.testing.assert_allclose(run_binary(getattr(nl, name), X, Y), reference(X, Y), rtol=1e-6, atol=1e-6)


def test_number_and_column_operands_broadcast_along_the_free_axis():
    np.testing.assert_allclose(run_unary(lambda t: nl.add(t, 2.5), X), X + 2.5, rtol=1e-6)
    np.testing.assert_allclose(run_unary(lambda t: nl.subtract(1.0, t), X), 1.0 - X, rtol=1e-6)

    def scale_rows(t):
        return nl.multiply(t, nl.max(t, axis=1, keepdims=True))
    np.testing.assert_allclose(run_unary(scale_rows, X), X * X.max(axis=1, keepdims=True), rtol=1e-6)


@pytest.mark.parametrize("name, reference", [
    ("exp", torch.exp), ("tanh", torch.tanh), ("sigmoid", torch.sigmoid), ("relu", torch.relu),
    ("gelu", torch.nn.functional.gelu), ("silu", torch.nn.functional.silu), ("erf", torch.erf),
    ("square", torch.square), ("abs", torch.abs), ("sin", torch.sin), ("softplus", torch.nn.functional.softplus),
    ("negative", torch.neg), ("floor", torch.floor),
])
def test_unary_math_matches_torch(name, reference):
    x = np.clip(X, -3.0, 3.0)   # inside every function's valid input range (sin: [-pi, pi])
    expected = reference(torch.from_numpy(x)).numpy()
    np.testing.assert_allclose(run_unary(getattr(nl, name), x), expected, rtol=2e-6, atol=2e-6)


def test_sqrt_rsqrt_log_reciprocal_on_positive_inputs():
    p = np.abs(X) + 0.1
    np.testing.assert_allclose(run_unary(nl.sqrt, p), np.sqrt(p), rtol=1e-6)
    np.testing.assert_allclose(run_unary(nl.rsqrt, p), 1 / np.sqrt(p), rtol=1e-6)
    np.testing.assert_allclose(run_unary(nl.log, p), np.log(p), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(run_unary(nl.reciprocal, p), 1 / p, rtol=1e-6)


@pytest.mark.parametrize("name, reference", [
    ("sum", np.sum), ("max", np.max), ("min", np.min), ("mean", np.mean), ("var", np.var), ("prod", np.prod),
])
def test_reductions_along_the_free_axis(name, reference):
    x = X[:, :8] if name == "prod" else X
    got = run_unary(lambda t: getattr(nl, name)(t, axis=1, keepdims=True, dtype=nl.float32), x)
    np.testing.assert_allclose(got, reference(x, axis=1, keepdims=True), rtol=1e-5, atol=1e-5)


def test_softmax_rms_norm_and_where_match_torch():
    t = torch.from_numpy(X)
    np.testing.assert_allclose(run_unary(nl.softmax, X), torch.softmax(t, -1).numpy(), rtol=1e-5, atol=1e-7)
    w = rng.standard_normal((1, 256)).astype(np.float32)
    expected = (t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * torch.from_numpy(w)).numpy()
    np.testing.assert_allclose(run_binary(lambda a, b: nl.rms_norm(a, b, axis=1), X, np.broadcast_to(w, X.shape).copy()),
                               expected, rtol=1e-5, atol=1e-5)

    @nki.jit
    def row_weight(a, g):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.rms_norm(nl.load(a), nl.load(g), axis=1))
        return out
    np.testing.assert_allclose(nki.simulate(row_weight)(X, w), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(run_binary(lambda a, b: nl.where(nl.greater(a, b), a, b), X, Y), np.maximum(X, Y))


def test_matmul_with_and_without_transposed_x():
    a = rng.standard_normal((128, 96)).astype(np.float32)   # [M, K]
    b = rng.standard_normal((96, 300)).astype(np.float32)   # [K, N]

    @nki.jit
    def mm(x, y, transpose_x):
        out = nl.ndarray((x.shape[1] if transpose_x else x.shape[0], y.shape[1]), nl.float32, buffer=nl.shared_hbm)
        result = nl.ndarray(out.shape, nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=result, src=nl.matmul(nl.load(x), nl.load(y), transpose_x=transpose_x))
        nl.store(out, result)
        return out
    np.testing.assert_allclose(nki.simulate(mm)(a, b, False), a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(nki.simulate(mm)(a.T.copy()[:96], b, True), a @ b, rtol=1e-4, atol=1e-4)


def test_bf16_stores_round_like_torch_and_precise_fp_off_keeps_fp32(monkeypatch):
    @nki.jit
    def to_bf16_and_back(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.copy(nl.load(a), dtype=nl.bfloat16))
        return out
    expected = torch.from_numpy(X).bfloat16().float().numpy()
    np.testing.assert_array_equal(nki.simulate(to_bf16_and_back)(X), expected)
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    np.testing.assert_array_equal(nki.simulate(to_bf16_and_back)(X), X)


@pytest.mark.parametrize("dtype, torch_dtype", [("float16", torch.float16), ("float8_e5m2", torch.float8_e5m2),
                                               ("float8_e4m3fn", torch.float8_e4m3fn)])
def test_narrow_float_rounding_matches_torch(dtype, torch_dtype, monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen4")

    @nki.jit
    def convert(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        narrow = nl.ndarray(a.shape, getattr(nl, dtype), buffer=nl.sbuf)
        nisa.dma_copy(dst=narrow, src=a)
        nl.store(out, narrow)
        return out
    x = X * 10
    np.testing.assert_array_equal(nki.simulate(convert)(x), torch.from_numpy(x).to(torch_dtype).float().numpy())


def test_kernel_outputs_must_be_in_shared_hbm():
    @nki.jit
    def private_output(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.hbm)
        nl.store(out, nl.load(a))
        return out
    with pytest.raises(nki.NkiUsageError, match="shared_hbm"):
        nki.simulate(private_output)(X)


def test_spmd_grid_program_ids_and_print_inside_kernel(capsys):
    @nki.jit
    def rows_times_id(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        i, j = nl.program_id(0), nl.program_id(1)
        print("instance", i, j, "of", nl.num_programs(0), nl.num_programs(1))
        tile = nl.load(a[i * 64:(i + 1) * 64, j * 128:(j + 1) * 128])
        nl.device_print("tile", tile[0:1, 0:2])
        nl.store(out[i * 64:(i + 1) * 64, j * 128:(j + 1) * 128], nl.multiply(tile, float(i + 10 * j)))
        return out
    got = nki.simulate(rows_times_id)[2, 2](X)
    factors = np.array([[0, 10], [1, 11]], dtype=np.float32).repeat(64, axis=0).repeat(128, axis=1)
    np.testing.assert_allclose(got, X * factors, rtol=1e-6)
    printed = capsys.readouterr().out
    assert "instance 1 1 of 2 2" in printed and "tile" in printed


def test_simulate_and_benchmark_take_a_launch_with_its_grid():
    @nki.jit
    def scaled_by_instance(a):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        i = nl.program_id(0)
        nl.store(out[i * 64:(i + 1) * 64, :], nl.multiply(nl.load(a[i * 64:(i + 1) * 64, :]), float(i + 1)))
        return out
    expected = X * np.repeat(np.array([[1.0], [2.0]], dtype=np.float32), 64, axis=0)
    np.testing.assert_allclose(nki.simulate(scaled_by_instance[2, 1])(X), expected, rtol=1e-6)
    np.testing.assert_allclose(nki.simulate(scaled_by_instance)[2, 1](X), expected, rtol=1e-6)
    one_instance = nki.benchmark(scaled_by_instance[1, 1])(X).latency_ns
    assert nki.benchmark(scaled_by_instance[2, 1])(X).latency_ns > one_instance  # the grid is kept
    with pytest.raises(nki.NkiUsageError, match="take a kernel, kernel\\[grid\\] or a function"):
        nki.simulate(X)


def test_kernels_modify_numpy_inputs_in_place():
    @nki.jit
    def double_in_place(a):
        nl.store(a, nl.multiply(nl.load(a), 2.0))
    x = X.copy()
    nki.simulate(double_in_place)(x)
    np.testing.assert_allclose(x, 2 * X)


def test_access_patterns_reshape_and_breakpoint_inside_kernels(monkeypatch):
    stops = []
    monkeypatch.setattr("sys.breakpointhook", lambda *a, **k: stops.append(True))

    @nki.jit
    def every_other_column(a):
        out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
        tile = nl.load(a)                                            # [128, 256]
        picked = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=picked, src=tile.ap([[256, 128], [2, 128]], offset=1))
        breakpoint()
        nl.store(out.reshape((128, 2, 64)), picked.reshape((128, 2, 64)))
        return out
    np.testing.assert_array_equal(nki.simulate(every_other_column)(X), X[:, 1::2])
    assert stops == [True]


def test_dropout_zeroes_the_given_fraction_reproducibly_per_seed():
    ones = np.ones((128, 2000), dtype=np.float32)

    @nki.jit
    def drop(a, seed):
        nl.random_seed(seed)
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.dropout(nl.load(a), 0.25))
        return out
    first, again, other = drop(ones, 7), drop(ones, 7), drop(ones, 8)
    assert set(np.unique(first)) == {0.0, 1.0}
    assert (first == 0).mean() == pytest.approx(0.25, abs=0.01)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


def test_activation_inputs_outside_the_valid_range_warn():
    from localneuron.nki.activations import ActivationRangeWarning
    with pytest.warns(ActivationRangeWarning, match=r"nl.sin: inputs outside .* -3.14159 <= x <= 3.14159"):
        np.testing.assert_allclose(run_unary(nl.sin, np.full((4, 4), 4.0, np.float32)), np.sin(4.0), rtol=1e-6)
    with pytest.warns(ActivationRangeWarning, match="nl.reciprocal"):
        run_unary(nl.reciprocal, np.zeros((4, 4), np.float32))
