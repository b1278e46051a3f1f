"""Tensor add: tiles of 128 rows x 512 columns, two DMA loads, one VectorE add, one DMA store."""
import torch

import nki
import nki.isa as nisa
import nki.language as nl

from _check import report_and_check


@nki.jit
def tensor_add(a, b):
    rows, cols = a.shape
    out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
    tile_rows, tile_cols = nl.tile_size.pmax, 512
    for r in nl.affine_range(rows // tile_rows):
        for c in nl.affine_range(cols // tile_cols):
            part = (slice(r * tile_rows, (r + 1) * tile_rows), slice(c * tile_cols, (c + 1) * tile_cols))
            x = nl.ndarray((tile_rows, tile_cols), a.dtype, buffer=nl.sbuf)
            y = nl.ndarray((tile_rows, tile_cols), b.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=x, src=a[part])
            nisa.dma_copy(dst=y, src=b[part])
            total = nl.ndarray((tile_rows, tile_cols), a.dtype, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=total, data1=x, data2=y, op=nl.add)
            nisa.dma_copy(dst=out[part], src=total)
    return out


def main():
    a, b = torch.randn(256, 1024), torch.randn(256, 1024)
    report_and_check("tensor_add", tensor_add, (a.numpy(), b.numpy()), a + b, atol=1e-6, rtol=1e-6)


if __name__ == "__main__":
    main()
