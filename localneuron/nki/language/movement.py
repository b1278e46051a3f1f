"""Convenience wrappers over DMA and TensorE: nl.load, nl.store, nl.matmul, nl.transpose."""
from .. import buffers, isa
from ..dtypes import as_dtype, float32
from ..errors import require
from ..tensor import NkiTensor
from .creation import ndarray


def load(src, dtype=None):
    """Copy an HBM tensor into a new SBUF tile (one DMA)."""
    tile = ndarray(src.shape, as_dtype(dtype) if dtype else src.dtype, buffers.sbuf)
    isa.dma_copy(tile, src)
    return tile


def store(dst, value):
    """Copy an SBUF tile into an HBM tensor (one DMA)."""
    isa.dma_copy(dst, value)


def load_transpose2d(src, dtype=None):
    """Load a 2-D HBM tensor transposed; the DMA walks src column by column (slow, element descriptors)."""
    require(src.ndim == 2, f"load_transpose2d: src must be 2-D, got shape {list(src.shape)}")
    transposed = NkiTensor(src.storage, src.offset, (src.shape[1], src.shape[0]), (src.strides[1], src.strides[0]))
    return load(transposed, dtype)


def transpose(x, dtype=None):
    """PE transpose of a [P, F] SBUF tile into a new [F, P] PSUM tile."""
    out = ndarray((x.free_size, x.num_partitions), as_dtype(dtype) if dtype else float32, buffers.psum)
    isa.nc_transpose(out, x)
    return out


def matmul(x, y, transpose_x=False):
    """x @ y into a new fp32 PSUM tile; x.T @ y when transpose_x (x already has K on partitions)."""
    stationary = x
    if not transpose_x:
        # TensorE contracts over partitions, so x [M, K] is transposed to [K, M] first.
        flipped = transpose(x)
        stationary = ndarray(flipped.shape, x.dtype, buffers.sbuf)
        isa.tensor_copy(stationary, flipped)
    out = ndarray((stationary.free_size, y.free_size), float32, buffers.psum)
    isa.nc_matmul(out, stationary, y)
    return out
