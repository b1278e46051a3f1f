"""Fresh memory is poisoned (NaN for floats, 4 for integers) so reads of it show in results."""
import numpy as np

import nki
import nki.isa as nisa
import nki.language as nl

X = np.ones((128, 16), dtype=np.float32)


def test_unwritten_sbuf_reads_as_nan_and_spreads():
    @nki.jit
    def forgot_to_load(a):
        out = nl.ndarray(a.shape, nl.float32, buffer=nl.shared_hbm)
        tile = nl.ndarray(a.shape, nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile[:, 0:8], src=a[:, 0:8])       # only half the columns are loaded
        nl.store(out, nl.add(tile, 1.0))
        return out
    got = nki.simulate(forgot_to_load)(X)
    np.testing.assert_array_equal(got[:, :8], 2.0)
    assert np.isnan(got[:, 8:]).all()


def test_unwritten_integer_tiles_read_as_four():
    @nki.jit
    def raw(a):
        out = nl.ndarray((128, 4), nl.int32, buffer=nl.shared_hbm)
        nl.store(out, nl.ndarray((128, 4), nl.int32, buffer=nl.sbuf))
        return out
    np.testing.assert_array_equal(nki.simulate(raw)(X), 4)


def test_unwritten_kernel_output_and_psum_accumulation_show_nan(monkeypatch):
    @nki.jit
    def partial_output(a):
        out = nl.ndarray((128, 32), nl.float32, buffer=nl.shared_hbm)
        nl.store(out[:, 0:16], nl.load(a))
        return out
    got = nki.simulate(partial_output)(X)
    assert np.isnan(got[:, 16:]).all() and (got[:, :16] == 1).all()

    @nki.jit
    def accumulate_onto_garbage(a):
        out = nl.ndarray((16, 16), nl.float32, buffer=nl.shared_hbm)
        acc = nl.ndarray((16, 16), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=nl.load(a), moving=nl.load(a), accumulate=True)
        staged = nl.ndarray((16, 16), nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=staged, src=acc)
        nl.store(out, staged)
        return out
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen4")   # gen2/3 reject this outright
    assert np.isnan(nki.simulate(accumulate_onto_garbage)(X)).all()
