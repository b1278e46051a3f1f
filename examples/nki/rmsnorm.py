"""RMSNorm: y = x / sqrt(mean(x^2) + eps) * g, rows on partitions, hidden size on the free axis.

The weight row is broadcast to all 128 partitions once, with a TensorE matmul against a ones
row (engines cannot copy across partitions element by element). Per tile: ScalarE squares and
sums in one instruction, ScalarE takes rsqrt(sum/H + eps), VectorE scales by the per-row
factor and multiplies by the weight.
"""
import torch

import nki
import nki.isa as nisa
import nki.language as nl

from _check import report_and_check


@nki.jit
def rmsnorm(x, g, eps=1e-6):
    rows, hidden = x.shape
    pmax = nl.tile_size.pmax
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    g_row = nl.ndarray((1, hidden), nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=g_row, src=g.reshape((1, hidden)))
    ones = nl.ndarray((1, pmax), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    weight = nl.ndarray((pmax, hidden), nl.float32, buffer=nl.sbuf)
    for c0 in nl.static_range(0, hidden, nl.tile_size.psum_bank_fmax):
        width = min(nl.tile_size.psum_bank_fmax, hidden - c0)
        spread = nl.ndarray((pmax, width), nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=spread, stationary=ones, moving=g_row[:, c0:c0 + width])
        nisa.tensor_copy(dst=weight[:, c0:c0 + width], src=spread)
    eps_column = nl.ndarray((pmax, 1), nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=eps_column, value=eps)

    for r0 in nl.affine_range(0, rows, pmax):
        n = min(pmax, rows - r0)
        tile = nl.ndarray((n, hidden), x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[r0:r0 + n])
        squares = nl.ndarray((n, hidden), nl.float32, buffer=nl.sbuf)
        sum_sq = nl.ndarray((n, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=squares, op=nl.square, data=tile, reduce_op=nl.add, reduce_res=sum_sq)
        inv_rms = nl.ndarray((n, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inv_rms, op=nl.rsqrt, data=sum_sq, scale=1.0 / hidden, bias=eps_column[:n])
        normed = nl.ndarray((n, hidden), nl.float32, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=normed, data=tile, op0=nl.multiply, operand0=inv_rms)
        result = nl.ndarray((n, hidden), x.dtype, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=result, data1=normed, data2=weight[:n], op=nl.multiply)
        nisa.dma_copy(dst=out[r0:r0 + n], src=result)
    return out


def reference(x, g, eps=1e-6):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * g


def main():
    x, g = torch.randn(200, 768), torch.randn(768)
    report_and_check("rmsnorm", rmsnorm, (x.numpy(), g.numpy()), reference(x, g), atol=1e-5, rtol=1e-5)


if __name__ == "__main__":
    main()
