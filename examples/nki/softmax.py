"""Row softmax: rows on partitions, one pass per 128-row tile.

VectorE finds the row max, ScalarE computes exp(x - max) and the row sum in the same
instruction (its accumulator registers), ScalarE takes the reciprocal, VectorE scales.
On gen4 the exp and the sum run on VectorE's `exponential` instruction instead (4x faster).
"""
import torch

import nki
import nki.isa as nisa
import nki.language as nl

from _check import report_and_check


@nki.jit
def softmax_rows(x):
    rows, cols = x.shape
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    for r0 in nl.affine_range(0, rows, nl.tile_size.pmax):
        n = min(nl.tile_size.pmax, rows - r0)
        tile = nl.ndarray((n, cols), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[r0:r0 + n])
        exps = nl.ndarray((n, cols), nl.float32, buffer=nl.sbuf)
        row_sum = nl.ndarray((n, 1), nl.float32, buffer=nl.sbuf)
        if nisa.get_nc_version() >= nisa.nc_version.gen4:
            row_max = nl.ndarray((n, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=row_max, op=nl.maximum, data=tile, axis=1, keepdims=True)
            nisa.exponential(dst=exps, src=tile, max_value=row_max, reduce_res=row_sum)
        else:
            neg_max = nl.ndarray((n, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=neg_max, op=nl.maximum, data=tile, axis=1, negate=True, keepdims=True)
            nisa.activation(dst=exps, op=nl.exp, data=tile, bias=neg_max, reduce_op=nl.add, reduce_res=row_sum)
        inverse = nl.ndarray((n, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inverse, op=nl.reciprocal, data=row_sum)
        result = nl.ndarray((n, cols), x.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=result, data=exps, op0=nl.multiply, operand0=inverse)
        nisa.dma_copy(dst=out[r0:r0 + n], src=result)
    return out


def main():
    x = torch.randn(300, 1024) * 4
    report_and_check("softmax", softmax_rows, (x.numpy(),), torch.softmax(x, dim=-1), atol=1e-6, rtol=1e-5)


if __name__ == "__main__":
    main()
