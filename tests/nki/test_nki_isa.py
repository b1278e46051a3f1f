"""nisa instruction semantics: PSUM accumulation, accumulators, transposes, patterns, bit ops."""
import numpy as np
import pytest
import torch

import nki
import nki.isa as nisa
import nki.language as nl

rng = np.random.default_rng(1)
A = rng.standard_normal((128, 128)).astype(np.float32)
B = rng.standard_normal((128, 512)).astype(np.float32)


def evict(psum_tile, out):
    staged = nl.ndarray(psum_tile.shape, nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=staged, src=psum_tile)
    nl.store(out, staged)


@pytest.mark.parametrize("accumulate, factor", [(None, 3), (False, 1)])
def test_nc_matmul_accumulates_in_psum_until_evicted(accumulate, factor):
    @nki.jit
    def three_times(a, b):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        sa, sb = nl.load(a), nl.load(b)
        for _ in range(3):
            nisa.nc_matmul(dst=acc, stationary=sa, moving=sb, accumulate=accumulate)
        evict(acc, out)
        # After eviction a new group starts: accumulate=None overwrites again.
        nisa.nc_matmul(dst=acc, stationary=sa, moving=sb)
        second = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        evict(acc, second)
        return out, second
    first, second = nki.simulate(three_times)(A, B)
    np.testing.assert_allclose(first, factor * A.T @ B, rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(second, A.T @ B, rtol=1e-4, atol=1e-3)


def test_bf16_matmul_accumulates_in_fp32():
    a16 = torch.from_numpy(A).bfloat16()
    b16 = torch.from_numpy(B).bfloat16()

    @nki.jit
    def mm(a, b):
        out = nl.ndarray((128, 512), nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((128, 512), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=nl.load(a), moving=nl.load(b))
        evict(acc, out)
        return out
    got = mm(a16, b16)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, a16.float().T @ b16.float(), rtol=1e-5, atol=1e-4)


def test_activation_accumulator_commands_and_scale_bias():
    x = rng.standard_normal((64, 32)).astype(np.float32)

    @nki.jit
    def accumulate_twice(a):
        out = nl.ndarray((64, 1), nl.float32, buffer=nl.shared_hbm)
        scaled = nl.ndarray((64, 32), nl.float32, buffer=nl.shared_hbm)
        tile = nl.load(a)
        bias = nl.full((64, 1), 0.5, nl.float32)
        res = nl.ndarray((64, 32), nl.float32, buffer=nl.sbuf)
        total = nl.ndarray((64, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=res, op=nl.copy, data=tile, scale=2.0, bias=bias, reduce_op=nl.add,
                        reduce_cmd=nisa.reduce_cmd.reset_reduce)
        nisa.activation(dst=res, op=nl.copy, data=tile, scale=2.0, bias=bias, reduce_op=nl.add,
                        reduce_res=total, reduce_cmd=nisa.reduce_cmd.reduce)
        nl.store(out, total)
        nl.store(scaled, res)
        return out, scaled
    total, scaled = nki.simulate(accumulate_twice)(x)
    np.testing.assert_allclose(scaled, 2 * x + 0.5, rtol=1e-6)
    np.testing.assert_allclose(total, 2 * (2 * x + 0.5).sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-5)


def test_exponential_on_gen4_subtracts_max_and_sums(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    x = rng.standard_normal((128, 64)).astype(np.float32)

    @nki.jit
    def exp_sum(a):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        sums = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        tile = nl.load(a)
        e = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        s = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.exponential(dst=e, src=tile, max_value=1.5, reduce_res=s, reduce_init=1.0)
        nl.store(out, e)
        nl.store(sums, s)
        return out, sums
    e, s = nki.simulate(exp_sum)(x)
    np.testing.assert_allclose(e, np.exp(x - 1.5), rtol=1e-6)
    np.testing.assert_allclose(s, 1.0 + np.exp(x - 1.5).sum(axis=1, keepdims=True), rtol=1e-5)


@pytest.mark.parametrize("engine, shape", [(nisa.engine.tensor, (128, 96)), (nisa.engine.vector, (32, 16))])
def test_nc_transpose_on_tensor_and_vector_engines(engine, shape):
    x = rng.standard_normal(shape).astype(np.float32)

    @nki.jit
    def flip(a):
        out = nl.ndarray(shape[::-1], nl.float32, buffer=nl.shared_hbm)
        t = nl.ndarray(shape[::-1], nl.float32, buffer=nl.psum if engine == nisa.engine.tensor else nl.sbuf)
        nisa.nc_transpose(dst=t, data=nl.load(a), engine=engine)
        staged = nl.ndarray(shape[::-1], nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=staged, src=t)
        nl.store(out, staged)
        return out
    np.testing.assert_array_equal(nki.simulate(flip)(x), x.T)


def test_iota_and_affine_select_build_a_causal_mask():
    @nki.jit
    def causal(a):
        out = nl.ndarray((128, 128), nl.float32, buffer=nl.shared_hbm)
        index = nl.ndarray((128, 128), nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=index, pattern=[[1, 128]], offset=0, channel_multiplier=1000)
        masked = nl.ndarray((128, 128), nl.float32, buffer=nl.sbuf)
        nisa.affine_select(dst=masked, pattern=[[-1, 128]], offset=0, channel_multiplier=1,
                           on_true_tile=nl.load(a), on_false_value=-1e4, cmp_op=nl.greater_equal)
        nl.store(out, masked)
        ids = nl.ndarray((128, 128), nl.int32, buffer=nl.shared_hbm)
        nl.store(ids, index)
        return out, ids
    masked, ids = nki.simulate(causal)(A)
    np.testing.assert_array_equal(masked, np.where(np.tril(np.ones((128, 128))) > 0, A, -1e4).astype(np.float32))
    np.testing.assert_array_equal(ids, np.arange(128)[:, None] * 1000 + np.arange(128)[None, :])


def test_tensor_scalar_two_ops_reverse_and_bitwise_on_integers():
    x = rng.integers(0, 1000, (128, 64)).astype(np.int32)

    @nki.jit
    def ops(a):
        out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        bits = nl.ndarray((128, 64), nl.int32, buffer=nl.shared_hbm)
        tile = nl.load(a)
        r = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=r, data=tile, op0=nl.subtract, operand0=10.0, reverse0=True,
                           op1=nl.multiply, operand1=0.5)
        nl.store(out, r)
        b = nl.ndarray((128, 64), nl.int32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=b, data=tile, op0=nl.bitwise_and, operand0=0xF0)
        nl.store(bits, b)
        return out, bits
    got, bits = nki.simulate(ops)(x)
    np.testing.assert_allclose(got, (10.0 - x) * 0.5)
    np.testing.assert_array_equal(bits, x & 0xF0)


def test_tensor_reduce_over_trailing_axes_with_negate():
    x = rng.standard_normal((128, 4, 8)).astype(np.float32)

    @nki.jit
    def red(a):
        out = nl.ndarray((128, 4), nl.float32, buffer=nl.shared_hbm)
        r = nl.ndarray((128, 4), nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=r, op=nl.maximum, data=nl.load(a), axis=2, negate=True)
        nl.store(out, r)
        return out
    np.testing.assert_array_equal(nki.simulate(red)(x), -x.max(axis=2))


def test_dma_between_dtypes_converts_and_lnc2_shares_outputs():
    @nki.jit
    def halves(a):
        out = nl.ndarray(a.shape, nl.bfloat16, buffer=nl.shared_hbm)
        half = a.shape[0] // nl.num_programs(0)
        rows = slice(nl.program_id(0) * half, (nl.program_id(0) + 1) * half)
        nisa.dma_copy(dst=out[rows], src=a[rows])
        return out
    got = nki.simulate(halves)[2](B)
    np.testing.assert_array_equal(got, torch.from_numpy(B).bfloat16().float().numpy())


def test_scalar_tensor_tensor_and_tensor_scalar_reduce():
    x = rng.standard_normal((128, 64)).astype(np.float32)
    y = rng.standard_normal((128, 64)).astype(np.float32)

    @nki.jit
    def fused(a, b):
        fused_out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        scaled_out = nl.ndarray((128, 64), nl.float32, buffer=nl.shared_hbm)
        row_max = nl.ndarray((128, 1), nl.float32, buffer=nl.shared_hbm)
        ta, tb = nl.load(a), nl.load(b)
        r = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=r, data=ta, op0=nl.subtract, operand0=1.0, op1=nl.multiply, operand1=tb)
        nl.store(fused_out, r)
        s = nl.ndarray((128, 64), nl.float32, buffer=nl.sbuf)
        m = nl.ndarray((128, 1), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar_reduce(dst=s, data=ta, op0=nl.multiply, operand0=3.0, reduce_op=nl.maximum, reduce_res=m)
        nl.store(scaled_out, s)
        nl.store(row_max, m)
        return fused_out, scaled_out, row_max
    fused_out, scaled_out, row_max = nki.simulate(fused)(x, y)
    np.testing.assert_allclose(fused_out, (x - 1.0) * y, rtol=1e-6)
    np.testing.assert_allclose(scaled_out, 3 * x, rtol=1e-6)
    np.testing.assert_allclose(row_max, (3 * x).max(axis=1, keepdims=True), rtol=1e-6)
