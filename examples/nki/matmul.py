"""Matrix multiplication two ways: a naive tiled kernel and a blocked one (the NKI tutorial's
first and last steps), both computing lhsT.T @ rhs with K on the partitions.

The naive kernel reloads a 128x128 stationary and a 128x512 moving tile for every matmul, so
it is DMA-bound on small (256 B / 1 KiB per partition) descriptors. The blocked kernel loads
K x M and K x N blocks once per block pair, keeps the M x N result in SBUF across K blocks,
and keeps TensorE busy.
"""
import torch

import nki
import nki.isa as nisa
import nki.language as nl

from _check import report_and_check

TILE_K = 128   # pmax: contraction on partitions
TILE_M = 128   # gemm_stationary_fmax
TILE_N = 512   # gemm_moving_fmax


@nki.jit
def matmul_naive(lhsT, rhs):
    k_size, m_size = lhsT.shape
    _, n_size = rhs.shape
    out = nl.ndarray((m_size, n_size), lhsT.dtype, buffer=nl.shared_hbm)
    for m in nl.affine_range(m_size // TILE_M):
        for n in nl.affine_range(n_size // TILE_N):
            acc = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
            for k in nl.affine_range(k_size // TILE_K):
                stationary = nl.ndarray((TILE_K, TILE_M), lhsT.dtype, buffer=nl.sbuf)
                moving = nl.ndarray((TILE_K, TILE_N), rhs.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=stationary, src=lhsT[k * TILE_K:(k + 1) * TILE_K, m * TILE_M:(m + 1) * TILE_M])
                nisa.dma_copy(dst=moving, src=rhs[k * TILE_K:(k + 1) * TILE_K, n * TILE_N:(n + 1) * TILE_N])
                nisa.nc_matmul(dst=acc, stationary=stationary, moving=moving)
            result = nl.ndarray((TILE_M, TILE_N), out.dtype, buffer=nl.sbuf)
            nisa.tensor_copy(dst=result, src=acc)
            nisa.dma_copy(dst=out[m * TILE_M:(m + 1) * TILE_M, n * TILE_N:(n + 1) * TILE_N], src=result)
    return out


@nki.jit
def matmul_blocked(lhsT, rhs, tiles_m=16, tiles_n=2, tiles_k=8):
    k_size, m_size = lhsT.shape
    _, n_size = rhs.shape
    block_m, block_n, block_k = TILE_M * tiles_m, TILE_N * tiles_n, TILE_K * tiles_k
    out = nl.ndarray((m_size, n_size), lhsT.dtype, buffer=nl.shared_hbm)
    # One fp32 accumulator row-block per M tile, reused for every (M, N) block.
    results = [nl.ndarray((TILE_M, block_n), nl.float32, buffer=nl.sbuf) for _ in range(tiles_m)]
    for n0 in nl.affine_range(0, n_size, block_n):
        for m0 in nl.affine_range(0, m_size, block_m):
            for result in results:
                nisa.memset(dst=result, value=0.0)
            for k0 in nl.sequential_range(0, k_size, block_k):
                lhs_block = nl.ndarray((TILE_K, tiles_k, block_m), lhsT.dtype, buffer=nl.sbuf)
                rhs_block = nl.ndarray((TILE_K, tiles_k, block_n), rhs.dtype, buffer=nl.sbuf)
                for k in nl.affine_range(tiles_k):
                    rows = slice(k0 + k * TILE_K, k0 + (k + 1) * TILE_K)
                    nisa.dma_copy(dst=lhs_block[:, k, :], src=lhsT[rows, m0:m0 + block_m])
                    nisa.dma_copy(dst=rhs_block[:, k, :], src=rhs[rows, n0:n0 + block_n])
                for m in nl.affine_range(tiles_m):
                    for n in nl.affine_range(tiles_n):
                        partial = nl.ndarray((TILE_M, TILE_N), nl.float32, buffer=nl.psum)
                        for k in nl.affine_range(tiles_k):
                            nisa.nc_matmul(dst=partial,
                                           stationary=lhs_block[:, k, m * TILE_M:(m + 1) * TILE_M],
                                           moving=rhs_block[:, k, n * TILE_N:(n + 1) * TILE_N])
                        columns = results[m][:, n * TILE_N:(n + 1) * TILE_N]
                        nisa.tensor_tensor(dst=columns, data1=columns, data2=partial, op=nl.add)
            for m, result in enumerate(results):
                staged = nl.ndarray((TILE_M, block_n), out.dtype, buffer=nl.sbuf)
                nisa.tensor_copy(dst=staged, src=result)
                nisa.dma_copy(dst=out[m0 + m * TILE_M:m0 + (m + 1) * TILE_M, n0:n0 + block_n], src=staged)
    return out


def main():
    lhsT, rhs = torch.randn(512, 256), torch.randn(512, 2048)
    expected = lhsT.T @ rhs
    args = (lhsT.numpy(), rhs.numpy())
    naive = report_and_check("matmul_naive", matmul_naive, args, expected, atol=1e-3, rtol=1e-4)
    blocked = report_and_check("matmul_blocked", matmul_blocked, args, expected, atol=1e-3, rtol=1e-4,
                               tiles_m=2, tiles_n=2, tiles_k=2)
    print(f"blocked is {naive.latency_ns / blocked.latency_ns:.1f}x faster than naive at this size")


if __name__ == "__main__":
    main()
