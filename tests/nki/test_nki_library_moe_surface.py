"""What the NKI Library's context-encoding MoE kernel (bwmm_shard_on_I) needs of the simulator: NKIObject records built
by keyword, dynamic addressing along a dimension of the tensor, indirect DMA in timing-only runs, TensorE transposes
into PSUM in the data's dtype, and the identity matrix in SBUF."""
from dataclasses import dataclass

import numpy as np
import pytest

import nki
import nki.isa as nisa
import nki.language as nl
from localneuron.nki.errors import NkiUsageError


class Dims(nl.NKIObject):
    B: int
    H: int
    derived: int

    def derive(self):
        self.derived = self.B * self.H


def test_a_record_of_fields_is_built_by_keyword_and_in_order():
    dims = Dims(B=4, H=8)   # the rest set later, as the library's DimensionSizes
    dims.derive()
    assert (dims.B, dims.H, dims.derived) == (4, 8, 32)
    assert Dims(1, 2).H == 2
    with pytest.raises(TypeError):
        Dims(C=1)

    class Own(nl.NKIObject):
        a: int

        def __init__(self, a=3):
            self.a = a
    assert Own().a == 3

    @dataclass
    class Record(nl.NKIObject):   # a dataclass keeps its own constructor, defaults and __post_init__
        a: int
        b: int | None = None

        def __post_init__(self):
            self.b = self.a + 1
    assert Record(1).b == 2


def test_a_scalar_offset_moves_along_a_dimension_of_the_tensor():
    # [E, I, H] weights: the block's expert selects along dimension 0 (stride I x H), whatever the pattern's strides
    weights = np.arange(3 * 4 * 8, dtype=np.float32).reshape(3, 4, 8)

    @nki.jit
    def kernel(w, expert):
        index = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=expert)
        tile = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=w.ap(pattern=[[8, 4], [1, 8]], offset=0, scalar_offset=index))
        out = nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tile)
        return out
    out = nki.simulate(kernel)(weights, np.array([[2]], dtype=np.int32))
    np.testing.assert_array_equal(out, weights[2])


def test_an_indirect_dma_is_costed_in_timing_runs_and_refused_with_values():
    @nki.jit
    def gather(table, rows):
        index = nl.ndarray((128, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=rows)
        tile = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=table.ap([[512, 128], [1, 512]], offset=0, vector_offset=index, indirect_dim=0))
        out = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tile)
        return out

    @nki.jit
    def direct(table, rows):
        tile = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=table[0:128, 0:512])
        out = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tile)
        return out
    shapes = (nki.ShapeOnly((1024, 512), "bfloat16"), nki.ShapeOnly((128, 1), "int32"))
    gathered = nki.benchmark(gather, numerics=False)(*shapes)
    # the same rows of the same length as a direct copy, plus the index load
    assert gathered.latency_ns >= nki.benchmark(direct, numerics=False)(*shapes).latency_ns
    with pytest.raises(NkiUsageError, match="timing-only"):
        nki.simulate(gather)(np.zeros((1024, 512), np.float32), np.zeros((128, 1), np.int32))


def test_a_tensore_transpose_writes_psum_in_the_datas_dtype_and_the_identity_is_in_sbuf(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "gen3")
    data = np.arange(128 * 128, dtype=np.float32).reshape(128, 128) % 7

    @nki.jit
    def kernel(a):
        tile = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=a)
        identity = nl.shared_identity_matrix(128, dtype=nl.bfloat16)
        assert identity.buffer == nl.sbuf
        result = nl.ndarray((128, 128), dtype=nl.bfloat16, buffer=nl.psum)
        nisa.nc_matmul(dst=result, stationary=tile, moving=identity, is_transpose=True)
        copied = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=copied, src=result)
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=copied)
        return out
    np.testing.assert_array_equal(nki.simulate(kernel)(data), data.T)
