"""Ops that only have CUDA kernels but that PyTorch's composite code picks on any accelerator, run on
the device decomposed into ops it has (as TorchNeuron lowers them), each with its backward.

RNN cells: aten::lstm/gru call the fused cells whenever the input is not on the CPU. SyncBatchNorm
calls the batch_norm_stats family on any accelerator. Attention: the flash and memory-efficient
kernels are reached by direct calls; the math (softmax(QK^T * scale + mask) V, with its log-sum-exp)
is what those kernels compute. The out_dtype matmuls are reached by direct calls.
A workspace tensor is private between a forward and its backward; the layouts here are our own.
"""
import math

import torch

# -- RNN cells --


def _opmath(*tensors):
    """float32 copies for the gate arithmetic, as CUDA's fused cells compute: one rounding per output."""
    return [t.float() if t is not None else None for t in tensors]


def _with_biases(input_gates, hidden_gates, input_bias, hidden_bias):
    if input_bias is not None:
        input_gates = input_gates + input_bias
    if hidden_bias is not None:
        hidden_gates = hidden_gates + hidden_bias
    return input_gates, hidden_gates


def fused_lstm_cell(input_gates, hidden_gates, cx, input_bias=None, hidden_bias=None):
    dtype = input_gates.dtype
    input_gates, hidden_gates, cx, input_bias, hidden_bias = _opmath(input_gates, hidden_gates, cx, input_bias,
                                                                    hidden_bias)
    input_gates, hidden_gates = _with_biases(input_gates, hidden_gates, input_bias, hidden_bias)
    i, f, g, o = (input_gates + hidden_gates).chunk(4, 1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy.to(dtype), cy.to(dtype), torch.cat([i, f, g, o], 1).to(dtype)


def fused_lstm_cell_backward_impl(grad_hy, grad_cy, cx, cy, workspace, has_bias):
    dtype = cx.dtype
    grad_hy, grad_cy, cx, cy, workspace = _opmath(grad_hy, grad_cy, cx, cy, workspace)
    i, f, g, o = workspace.chunk(4, 1)
    tanh_cy = cy.tanh()
    grad_c = torch.zeros_like(cy) if grad_cy is None else grad_cy
    if grad_hy is not None:
        grad_c = grad_c + grad_hy * o * (1 - tanh_cy * tanh_cy)
        grad_o = grad_hy * tanh_cy * o * (1 - o)
    else:
        grad_o = torch.zeros_like(o)
    grad_gates = torch.cat([grad_c * g * i * (1 - i), grad_c * cx * f * (1 - f), grad_c * i * (1 - g * g), grad_o], 1)
    grad_bias = grad_gates.sum(0).to(dtype) if has_bias else None
    return grad_gates.to(dtype), (grad_c * f).to(dtype), grad_bias


def fused_gru_cell(input_gates, hidden_gates, hx, input_bias=None, hidden_bias=None):
    dtype = input_gates.dtype
    input_gates, hidden_gates, hx, input_bias, hidden_bias = _opmath(input_gates, hidden_gates, hx, input_bias,
                                                                    hidden_bias)
    input_gates, hidden_gates = _with_biases(input_gates, hidden_gates, input_bias, hidden_bias)
    ir, iz, in_ = input_gates.chunk(3, 1)
    hr, hz, hn = hidden_gates.chunk(3, 1)
    r = (ir + hr).sigmoid()
    z = (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (hx - n)
    return hy.to(dtype), torch.cat([r, z, n, hx, hn], 1).to(dtype)


def fused_gru_cell_backward(grad_hy, workspace, has_bias):
    dtype = grad_hy.dtype
    grad_hy, workspace = _opmath(grad_hy, workspace)
    r, z, n, hx, hn = workspace.chunk(5, 1)
    grad_n = grad_hy * (1 - z) * (1 - n * n)
    grad_z = grad_hy * (hx - n) * z * (1 - z)
    grad_r = grad_n * hn * r * (1 - r)
    grad_input_gates = torch.cat([grad_r, grad_z, grad_n], 1)
    grad_hidden_gates = torch.cat([grad_r, grad_z, grad_n * r], 1)
    grad_hx = (grad_hy * z).to(dtype)
    if not has_bias:
        return grad_input_gates.to(dtype), grad_hidden_gates.to(dtype), grad_hx, None, None
    return (grad_input_gates.to(dtype), grad_hidden_gates.to(dtype), grad_hx, grad_input_gates.sum(0).to(dtype),
            grad_hidden_gates.sum(0).to(dtype))


# -- synchronized batch norm (nn.SyncBatchNorm on an accelerator): per-rank statistics, combined --

def _channel_dims(x):
    return [d for d in range(x.dim()) if d != 1]


def _per_channel(t, x):
    return t.reshape([1, -1] + [1] * (x.dim() - 2))


def batch_norm_stats(input, eps):
    x = input.float()
    mean = x.mean(_channel_dims(x))
    var = x.var(_channel_dims(x), correction=0)
    return mean, (var + eps).rsqrt()


def batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps, counts):
    counts = counts.float().unsqueeze(1)
    total = counts.sum()
    global_mean = (counts * mean).sum(0) / total
    rank_var = invstd.pow(-2) - eps
    global_var = (counts * (rank_var + (mean - global_mean).pow(2))).sum(0) / total
    if running_mean is not None:
        running_mean.copy_((1 - momentum) * running_mean + momentum * global_mean)
    if running_var is not None:
        unbiased = global_var * total / (total - 1)
        running_var.copy_((1 - momentum) * running_var + momentum * unbiased)
    return global_mean, (global_var + eps).rsqrt()


def batch_norm_gather_stats(input, mean, invstd, running_mean, running_var, momentum, eps, count):
    counts = torch.full((mean.shape[0],), count, dtype=torch.float32, device=mean.device)
    return batch_norm_gather_stats_with_counts(input, mean, invstd, running_mean, running_var, momentum, eps, counts)


def batch_norm_elemt(input, weight, bias, mean, invstd, eps):
    y = (input.float() - _per_channel(mean, input)) * _per_channel(invstd, input)
    if weight is not None:
        y = y * _per_channel(weight.float(), input)
    if bias is not None:
        y = y + _per_channel(bias.float(), input)
    return y.to(input.dtype)


def batch_norm_backward_reduce(grad_out, input, mean, invstd, weight, input_g, weight_g, bias_g):
    dims = _channel_dims(input)
    dy = grad_out.float()
    sum_dy = dy.sum(dims)
    sum_dy_xmu = (dy * (input.float() - _per_channel(mean, input))).sum(dims)
    param_dtype = weight.dtype if weight is not None else input.dtype
    # All four results whatever input_g / weight_g / bias_g say, as TorchNeuron's kernel gives them (CUDA's leaves
    # the unrequested ones undefined); SyncBatchNorm's backward reads only the ones it asked for either way.
    return sum_dy, sum_dy_xmu, (sum_dy_xmu * invstd).to(param_dtype), sum_dy.to(param_dtype)


def batch_norm_backward_elemt(grad_out, input, mean, invstd, weight, sum_dy, sum_dy_xmu, count):
    total = count.float().sum()
    mean_dy = _per_channel(sum_dy / total, input)
    mean_dy_xmu = _per_channel(sum_dy_xmu / total, input)
    scale = _per_channel(invstd, input)
    xmu = input.float() - _per_channel(mean, input)
    grad = (grad_out.float() - mean_dy - xmu * scale * scale * mean_dy_xmu) * scale
    if weight is not None:
        grad = grad * _per_channel(weight.float(), input)
    return grad.to(input.dtype)


# -- matmuls with an output dtype (bf16/fp16 inputs accumulated into a wider result) --

def mm_dtype(self, mat2, out_dtype):
    return torch.mm(self.to(out_dtype), mat2.to(out_dtype))


def bmm_dtype(self, mat2, out_dtype):
    return torch.bmm(self.to(out_dtype), mat2.to(out_dtype))


def addmm_dtype(self, mat1, mat2, out_dtype, *, beta=1, alpha=1):
    return torch.addmm(self.to(out_dtype), mat1.to(out_dtype), mat2.to(out_dtype), beta=beta, alpha=alpha)


def baddbmm_dtype(self, batch1, batch2, out_dtype, *, beta=1, alpha=1):
    return torch.baddbmm(self.to(out_dtype), batch1.to(out_dtype), batch2.to(out_dtype), beta=beta, alpha=alpha)


# -- attention: query/key/value are (batch, seq, heads, dim) in both kernels --

def _refuse_varlen_and_dropout(op: str, dropout_p: float, *ragged) -> None:
    if dropout_p > 0.0:
        raise NotImplementedError(
            f"{op} with dropout is not supported on the neuron device. Call "
            "torch.nn.functional.scaled_dot_product_attention (it runs the device's fused attention) instead.")
    if any(t is not None for t in ragged):
        raise NotImplementedError(f"{op} with ragged (cumulative sequence length) batches is not supported on the "
                                  "neuron device. Pad the batch and pass an attention mask instead.")


def _expand_kv(q, k, v):
    """Grouped-query attention: each key/value head serves heads(q) / heads(k) query heads."""
    groups = q.shape[2] // k.shape[2]
    if groups == 1:
        return k, v
    return k.repeat_interleave(groups, dim=2), v.repeat_interleave(groups, dim=2)


def _scores(q, k, scale, bias, causal_from_bottom_right):
    """float32 scores (batch, heads, q_len, k_len) with the mask applied; causal_from_bottom_right None: no mask."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float()) * scale
    if bias is not None:
        s = s + bias.float()
    if causal_from_bottom_right is not None:
        q_len, k_len = s.shape[-2], s.shape[-1]
        offset = k_len - q_len if causal_from_bottom_right else 0
        keep = torch.ones(q_len, k_len, dtype=torch.bool, device=s.device).tril(offset)
        s = s.masked_fill(~keep, float("-inf"))
    return s, scale


def _attention(q, k, v, scale, bias, causal_from_bottom_right):
    k, v = _expand_kv(q, k, v)
    s, _ = _scores(q, k, scale, bias, causal_from_bottom_right)
    logsumexp = s.logsumexp(-1)
    p = (s - logsumexp.unsqueeze(-1)).exp().nan_to_num(0.0)
    out = torch.einsum("bhqk,bkhd->bqhd", p, v.float()).to(q.dtype)
    return out, logsumexp


def _attention_backward(grad_out, q, k, v, out, bias, scale, causal_from_bottom_right):
    heads_kv = k.shape[2]
    k_full, v_full = _expand_kv(q, k, v)
    s, scale = _scores(q, k_full, scale, bias, causal_from_bottom_right)
    p = (s - s.logsumexp(-1, keepdim=True)).exp().nan_to_num(0.0)
    do = grad_out.float()
    grad_v = torch.einsum("bhqk,bqhd->bkhd", p, do)
    grad_p = torch.einsum("bqhd,bkhd->bhqk", do, v_full.float())
    row = (do * out.float()).sum(-1).transpose(1, 2).unsqueeze(-1)  # (b, h, q, 1)
    grad_s = p * (grad_p - row)
    grad_q = torch.einsum("bhqk,bkhd->bqhd", grad_s, k_full.float()) * scale
    grad_k = torch.einsum("bhqk,bqhd->bkhd", grad_s, q.float()) * scale
    if heads_kv != q.shape[2]:  # sum the gradients of the query heads that shared a key/value head
        b, n, _, d = grad_k.shape
        grad_k = grad_k.reshape(b, n, heads_kv, -1, d).sum(3)
        grad_v = grad_v.reshape(b, n, heads_kv, -1, d).sum(3)
    return grad_q.to(q.dtype), grad_k.to(k.dtype), grad_v.to(v.dtype), grad_s


def _no_rng_state(device):
    return torch.zeros(2, dtype=torch.uint64, device=device)


def flash_attention_forward(query, key, value, cum_seq_q, cum_seq_k, max_q, max_k, dropout_p, is_causal,
                            return_debug_mask, *, scale=None, window_size_left=None, window_size_right=None,
                            seqused_k=None, alibi_slopes=None, block_table=None, num_splits=None):
    _refuse_varlen_and_dropout("aten::_flash_attention_forward", dropout_p, cum_seq_q, cum_seq_k, seqused_k,
                               block_table, alibi_slopes)
    out, logsumexp = _attention(query, key, value, scale, None, True if is_causal else None)
    empty = query.new_empty(0)
    return out, logsumexp, _no_rng_state(query.device), empty, empty


def flash_attention_backward(grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, max_q, max_k,
                             dropout_p, is_causal, rng_state, unused, *, scale=None, window_size_left=None,
                             window_size_right=None):
    grad_q, grad_k, grad_v, _ = _attention_backward(grad_out, query, key, value, out, None, scale,
                                                    True if is_causal else None)
    return grad_q, grad_k, grad_v


# custom_mask_type: 0 no mask, 1 causal from the top left, 2 causal from the bottom right
_CAUSAL_FROM_BOTTOM_RIGHT = {0: None, 1: False, 2: True}
_LOGSUMEXP_ALIGNMENT = 32  # the kernel pads logsumexp's query dimension to its block size


def efficient_attention_forward(query, key, value, bias, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                                dropout_p, custom_mask_type, compute_log_sumexp=False, *, scale=None,
                                seqlen_k=None, window_size=None):
    _refuse_varlen_and_dropout("aten::_efficient_attention_forward", dropout_p, cu_seqlens_q, cu_seqlens_k,
                               seqlen_k)
    out, logsumexp = _attention(query, key, value, scale, bias, _CAUSAL_FROM_BOTTOM_RIGHT[custom_mask_type])
    q_len = query.shape[1]
    padded = math.ceil(q_len / _LOGSUMEXP_ALIGNMENT) * _LOGSUMEXP_ALIGNMENT if compute_log_sumexp else 0
    lse = logsumexp.new_zeros(*logsumexp.shape[:2], padded)
    if compute_log_sumexp:
        lse[..., :q_len] = logsumexp
    seed = torch.zeros((), dtype=torch.int64, device=query.device)
    return out, lse, seed, seed.clone(), q_len, key.shape[1]


def efficient_attention_backward(grad_out, query, key, value, bias, out, cu_seqlens_q, cu_seqlens_k,
                                 max_seqlen_q, max_seqlen_k, logsumexp, dropout_p, philox_seed, philox_offset,
                                 custom_mask_type, bias_requires_grad, *, scale=None, num_splits_key=None,
                                 window_size=None, shared_storage_dqdkdv=False):
    grad_q, grad_k, grad_v, grad_s = _attention_backward(grad_out, query, key, value, out, bias, scale,
                                                         _CAUSAL_FROM_BOTTOM_RIGHT[custom_mask_type])
    grad_bias = grad_s.to(bias.dtype).sum_to_size(bias.shape) if bias is not None and bias_requires_grad else None
    return grad_q, grad_k, grad_v, grad_bias


# -- normalisation --

def rms_norm(input, normalized_shape, weight=None, eps=None):
    """TorchNeuron registers rms_norm itself: one _fused_rms_norm (and its backward) whatever the dtypes, where
    PyTorch's composite code takes the fused op only when input and weight share a dtype. _fused_rms_norm computes
    in float32 and multiplies by the weight as it is, so the result is CPU's composite result, dtype included."""
    shape, dims = list(normalized_shape), ", ".join(str(n) for n in normalized_shape)
    torch._check(len(shape) > 0, lambda: "Expected normalized_shape to be at least 1-dimensional, i.e., containing at "
                 f"least one element, but got normalized_shape = {shape}")
    torch._check(weight is None or list(weight.shape) == shape, lambda: "Expected weight to be of same shape as "
                 f"normalized_shape, but got weight of shape {list(weight.shape)} and normalized_shape = {shape}")
    torch._check(input.dim() >= len(shape) and list(input.shape[input.dim() - len(shape):]) == shape,
                 lambda: f"Given normalized_shape={shape}, expected input with shape [*{dims}], but got input of "
                 f"size{list(input.shape)}")
    return torch._fused_rms_norm(input, shape, weight, eps)[0]


def fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight, output_mask):
    """PyTorch's reference decomposition, with the weight's gradient in the weight's dtype: the reference rounds it
    to the input's dtype, which loses bits when a bfloat16 input meets a float32 weight (autograd casts it back, too
    late). Both gradients are computed in float32 (float64 for float64) and cast once."""
    from torch._decomp.decompositions import _fused_rms_norm_backward  # PyTorch's reference decomposition
    from torch._prims_common import get_computation_dtype

    wide = input.to(get_computation_dtype(input.dtype))
    grad_input, grad_weight = _fused_rms_norm_backward(grad_out, wide, normalized_shape, rstd, weight, output_mask)
    return (None if grad_input is None else grad_input.to(input.dtype),
            None if grad_weight is None else grad_weight.to(weight.dtype))


# -- composite ops whose CPU code reads and writes the tensors' bytes --

def saturate_weight_to_fp16(weight):
    """_saturate_weight_to_fp16 as its CPU code does it, with device ops in the queue instead of writes through a raw
    pointer: the first size(0) * size(1) elements of a contiguous float32 weight are clamped in place to float16's
    range (NaN kept); a non-contiguous weight is returned untouched (the CPU code saturates a contiguous copy and
    returns the original). The CPU kernel's "FOUND weight out of range" log line is not printed: knowing would need
    a read of the device."""
    if weight.dtype != torch.float32:
        from localneuron.ops.lowering_errors import SCALAR_TYPE_NAMES

        raise RuntimeError(f"expected scalar type Float but found {SCALAR_TYPE_NAMES.get(weight.dtype, weight.dtype)}")
    count = weight.size(0) * weight.size(1)  # IndexError below two dimensions, as on the CPU
    if weight.is_contiguous():
        largest = torch.finfo(torch.float16).max
        with torch.no_grad():
            weight.view(-1)[:count].clamp_(-largest, largest)
    return weight


# -- storage plumbing --

def lazy_clone(self):
    """A copy-on-write clone needs a storage whose data pointer is its own context (host memory); a
    device storage carries the allocator's block, so the clone is made at once."""
    return self.clone()


_library = None


def register_decompositions(decompositions: dict) -> None:
    """decompositions: op -> op_records.Decompose; registered as the op's device kernel."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")
    for qualified, decomposition in decompositions.items():
        for key in decomposition.keys:
            _library.impl(qualified.removeprefix("aten::"), decomposition.fn, key)
