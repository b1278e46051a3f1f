"""Causal flash-attention forward for one head: O = softmax(Q K^T / sqrt(d) + causal mask) V.

Queries go on partitions in tiles of 128; keys and values stream in blocks of 512 (one PSUM
bank of scores). For each block: scores on TensorE, scaled into SBUF on ScalarE, masked with
GpSimd affine_select, online-softmax statistics on VectorE/ScalarE (running max m, running
sum l, rescale of the accumulator by exp(m_old - m_new)), then P^T via TensorE transposes and
P V accumulated in PSUM. Blocks entirely above the diagonal are skipped.
"""
import math

import torch

import nki
import nki.isa as nisa
import nki.language as nl

from _check import report_and_check

Q_TILE, KV_BLOCK, PE = 128, 512, 128
MASKED = -9984.0   # large negative score for masked positions (exp underflows to 0)


def transposed_copy(src_rows, d):
    """[128, d] rows -> [d, 128] in SBUF through a TensorE transpose."""
    flipped = nl.ndarray((d, PE), nl.float32, buffer=nl.psum)
    nisa.nc_transpose(dst=flipped, data=src_rows)
    out = nl.ndarray((d, PE), nl.float32, buffer=nl.sbuf)
    nisa.tensor_copy(dst=out, src=flipped)
    return out


@nki.jit
def flash_attention_causal(q, k, v):
    seq, d = q.shape
    out = nl.ndarray((seq, d), q.dtype, buffer=nl.shared_hbm)
    scale = 1.0 / math.sqrt(d)
    # K^T for the whole sequence, d on partitions: the moving operand of every score matmul.
    k_t = nl.ndarray((d, seq), nl.float32, buffer=nl.sbuf)
    v_rows = nl.ndarray((PE, seq // PE, d), nl.float32, buffer=nl.sbuf)
    for t in nl.affine_range(seq // PE):
        rows = nl.ndarray((PE, d), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rows, src=k[t * PE:(t + 1) * PE])
        nisa.tensor_copy(dst=k_t[:, t * PE:(t + 1) * PE], src=transposed_copy(rows, d))
        nisa.dma_copy(dst=v_rows[:, t, :], src=v[t * PE:(t + 1) * PE])

    for qi in nl.affine_range(seq // Q_TILE):
        q0 = qi * Q_TILE
        q_rows = nl.ndarray((Q_TILE, d), nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=q_rows, src=q[q0:q0 + Q_TILE])
        q_t = transposed_copy(q_rows, d)
        running_max = nl.ndarray((Q_TILE, 1), nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=running_max, value=MASKED)
        running_sum = nl.zeros((Q_TILE, 1), nl.float32, buffer=nl.sbuf)
        acc = nl.zeros((Q_TILE, d), nl.float32, buffer=nl.sbuf)
        for k0 in nl.sequential_range(0, q0 + Q_TILE, KV_BLOCK):
            width = min(KV_BLOCK, seq - k0)
            scores_psum = nl.ndarray((Q_TILE, width), nl.float32, buffer=nl.psum)
            nisa.nc_matmul(dst=scores_psum, stationary=q_t, moving=k_t[:, k0:k0 + width])
            scores = nl.ndarray((Q_TILE, width), nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=scores, op=nl.copy, data=scores_psum, scale=scale)
            if k0 + width > q0:
                # keep key position <= query position: (q0 + p) - (k0 + x) >= 0
                nisa.affine_select(dst=scores, pattern=[[-1, width]], offset=q0 - k0, channel_multiplier=1,
                                   on_true_tile=scores, on_false_value=MASKED, cmp_op=nl.greater_equal)
            block_max = nl.ndarray((Q_TILE, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_reduce(dst=block_max, op=nl.maximum, data=scores, axis=1, keepdims=True)
            new_max = nl.ndarray((Q_TILE, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=new_max, data1=running_max, data2=block_max, op=nl.maximum)
            neg_max = nl.ndarray((Q_TILE, 1), nl.float32, buffer=nl.sbuf)
            nisa.tensor_scalar(dst=neg_max, data=new_max, op0=nl.multiply, operand0=-1.0)
            probs = nl.ndarray((Q_TILE, width), nl.float32, buffer=nl.sbuf)
            block_sum = nl.ndarray((Q_TILE, 1), nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=probs, op=nl.exp, data=scores, bias=neg_max, reduce_op=nl.add, reduce_res=block_sum)
            correction = nl.ndarray((Q_TILE, 1), nl.float32, buffer=nl.sbuf)
            nisa.activation(dst=correction, op=nl.exp, data=running_max, bias=neg_max)
            nisa.tensor_scalar(dst=running_sum, data=running_sum, op0=nl.multiply, operand0=correction)
            nisa.tensor_tensor(dst=running_sum, data1=running_sum, data2=block_sum, op=nl.add)
            nisa.tensor_scalar(dst=acc, data=acc, op0=nl.multiply, operand0=correction)
            nisa.tensor_copy(dst=running_max, src=new_max)

            pv = nl.ndarray((Q_TILE, d), nl.float32, buffer=nl.psum)
            for c in nl.affine_range(width // PE):
                probs_t = transposed_copy(probs[:, c * PE:(c + 1) * PE], PE)
                nisa.nc_matmul(dst=pv, stationary=probs_t, moving=v_rows[:, k0 // PE + c, :])
            nisa.tensor_tensor(dst=acc, data1=acc, data2=pv, op=nl.add)

        inverse = nl.ndarray((Q_TILE, 1), nl.float32, buffer=nl.sbuf)
        nisa.activation(dst=inverse, op=nl.reciprocal, data=running_sum)
        result = nl.ndarray((Q_TILE, d), q.dtype, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=result, data=acc, op0=nl.multiply, operand0=inverse)
        nisa.dma_copy(dst=out[q0:q0 + Q_TILE], src=result)
    return out


def reference(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]


def main():
    q, k, v = (torch.randn(1024, 64) for _ in range(3))
    report_and_check("flash_attention_causal", flash_attention_causal, (q.numpy(), k.numpy(), v.numpy()),
                     reference(q, k, v), atol=1e-4, rtol=1e-4)


if __name__ == "__main__":
    main()
