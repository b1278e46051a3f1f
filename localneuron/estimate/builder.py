"""One tensor-parallel shard of a decoder layer, and of the embedding and the output head, built from
an Architecture as plain PyTorch modules (no transformers needed): what each rank of a Megatron-style
layout runs. Attention heads, kv heads (replicated when fewer than the ranks) and the MLP's hidden
units are split over `tp` ranks; with sequence parallelism the norms and residuals run on 1/tp of the
sequence."""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from localneuron.estimate.architecture import Architecture, shard
from localneuron.estimate.collective_markers import column_parallel, leave_parallel_region

RECOMPUTE = ("none", "selective", "full")
FUSED_ATTENTION = torch.ops.aten._scaled_dot_product_fused_attention_overrideable


class Norm(nn.Module):
    def __init__(self, arch: Architecture):
        super().__init__()
        self.rms = arch.family == "llama"
        self.weight = nn.Parameter(torch.empty(arch.hidden))
        self.bias = None if self.rms else nn.Parameter(torch.empty(arch.hidden))

    def forward(self, x):
        if not self.rms:
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias)
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(variance + 1e-5)).to(x.dtype) * self.weight


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


class DecoderLayerShard(nn.Module):
    def __init__(self, arch: Architecture, tp: int, sequence_parallel: bool, recompute: str):
        super().__init__()
        if recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
        self.arch, self.tp, self.sp, self.recompute = arch, tp, sequence_parallel, recompute
        self.heads = shard(arch.heads, tp)
        self.kv_heads = shard(arch.kv_heads, tp)   # one replicated kv head per rank when kv_heads < tp
        self.inner = shard(arch.intermediate, tp)
        d = arch.head_dim
        self.norm1, self.norm2 = Norm(arch), Norm(arch)
        self.qkv = nn.Linear(arch.hidden, (self.heads + 2 * self.kv_heads) * d, bias=arch.attention_bias)
        self.out = nn.Linear(self.heads * d, arch.hidden, bias=arch.attention_bias)
        gated = arch.family == "llama"
        self.up = nn.Linear(arch.hidden, (2 if gated else 1) * self.inner, bias=arch.mlp_bias)
        self.down = nn.Linear(self.inner, arch.hidden, bias=arch.mlp_bias)

    def _attention_core(self, q, k, v, causal):
        if self.kv_heads != self.heads:   # grouped-query attention: each kv head serves a group of q heads
            group = self.heads // self.kv_heads
            k = k.repeat_interleave(group, dim=1)
            v = v.repeat_interleave(group, dim=1)
        # the device's fused attention (what F.scaled_dot_product_attention runs on neuron tensors)
        dropout = self.arch.dropout if self.training else 0.0
        return FUSED_ATTENTION(q, k, v, None, dropout, causal, scale=1.0 / math.sqrt(self.arch.head_dim))[0]

    def _attention(self, x, cos, sin, past):
        b = x.shape[0]
        s = x.shape[1] * (self.tp if self.sp else 1)
        d = self.arch.head_dim
        q, k, v = column_parallel(x, self.qkv, self.tp, self.sp).split([self.heads * d, self.kv_heads * d, self.kv_heads * d], dim=-1)
        q = q.view(b, s, self.heads, d).transpose(1, 2)
        k = k.view(b, s, self.kv_heads, d).transpose(1, 2)
        v = v.view(b, s, self.kv_heads, d).transpose(1, 2)
        if cos is not None:
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if past is not None:             # decode: the new token's k/v join the cache
            k = torch.cat((past[0], k), dim=2)
            v = torch.cat((past[1], v), dim=2)
        causal = past is None and s > 1
        if self.recompute == "selective" and self.training:
            attended = checkpoint(self._attention_core, q, k, v, causal, use_reentrant=False)
        else:
            attended = self._attention_core(q, k, v, causal)
        return self.out(attended.transpose(1, 2).reshape(b, s, self.heads * d))

    def _mlp(self, x):
        up = column_parallel(x, self.up, self.tp, self.sp)
        if self.arch.family == "llama":
            gate, up = up.chunk(2, dim=-1)
            return self.down(F.silu(gate) * up)
        return self.down(F.gelu(up, approximate="tanh"))

    def _block(self, x, cos, sin, past):
        p = self.arch.dropout if self.training else 0.0
        attended = self._attention(self.norm1(x), cos, sin, past)
        x = x + F.dropout(leave_parallel_region(attended, self.tp, self.sp), p, self.training)
        return x + F.dropout(leave_parallel_region(self._mlp(self.norm2(x)), self.tp, self.sp), p, self.training)

    def forward(self, x, cos=None, sin=None, past=None):
        if self.recompute == "full" and self.training:
            return checkpoint(self._block, x, cos, sin, past, use_reentrant=False)
        return self._block(x, cos, sin, past)


class EmbeddingShard(nn.Module):
    """Vocabulary-parallel embedding (and GPT's learned positions): each rank holds vocab/tp rows."""
    def __init__(self, arch: Architecture, tp: int, sequence_parallel: bool, positions: int):
        super().__init__()
        self.tp, self.sp = tp, sequence_parallel
        self.tokens = nn.Embedding(shard(arch.vocab, tp), arch.hidden)
        self.positions = nn.Embedding(positions, arch.hidden) if arch.family == "gpt" else None

    def forward(self, ids):
        x = self.tokens(ids)
        x = leave_parallel_region(x, self.tp, self.sp)
        if self.positions is not None:
            x = x + self.positions(torch.arange(x.shape[1], device=ids.device))
        return x


class HeadShard(nn.Module):
    """Final norm, vocabulary-parallel output projection and (training) the cross-entropy loss."""
    def __init__(self, arch: Architecture, tp: int, sequence_parallel: bool):
        super().__init__()
        self.tp, self.sp = tp, sequence_parallel
        self.norm = Norm(arch)
        self.project = nn.Linear(arch.hidden, shard(arch.vocab, tp), bias=False)

    def forward(self, x, labels=None):
        logits = column_parallel(self.norm(x), self.project, self.tp, self.sp)
        if labels is None:
            return logits
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
