"""One tensor-parallel shard of a transformer layer, and of the embedding and the head, built from an
Architecture as plain PyTorch modules (no transformers needed): what each rank of a tuned Megatron-style
recipe runs. Attention heads, kv heads (replicated when fewer than the ranks), the MLP's hidden units and
every expert's hidden units are split over `tp` ranks; with sequence parallelism the norms and residuals
run on 1/tp of the sequence. Attention is the device's fused kernel, grouped-query attention included
(the kernel reads each kv head once for its group of query heads).

A mixture-of-experts MLP routes every token to its top-k experts; routing is taken as balanced (each
expert that gets tokens gets the same number), so the experts run as one grouped matmul over the
experts that have tokens, reading only their weights.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from localneuron.costmodel import moe_blocks
from localneuron.estimate.architecture import Architecture, shard
from localneuron.estimate.trace import record_kernel
from localneuron.estimate.collective_markers import (
    column_parallel, enter_parallel_region, leave_parallel_region, vocabulary_parallel_loss,
)

RECOMPUTE = ("none", "selective", "full")
FUSED_ATTENTION = torch.ops.aten._scaled_dot_product_fused_attention_overrideable


class Norm(nn.Module):
    def __init__(self, arch: Architecture, width: int | None = None):
        super().__init__()
        width = width or arch.hidden
        self.rms = arch.family == "llama"
        self.weight = nn.Parameter(torch.empty(width))
        self.bias = None if self.rms else nn.Parameter(torch.empty(width))

    def forward(self, x):
        if not self.rms:
            return F.layer_norm(x, x.shape[-1:], self.weight, self.bias)
        variance = x.float().pow(2).mean(-1, keepdim=True)
        return (x.float() * torch.rsqrt(variance + 1e-5)).to(x.dtype) * self.weight


def _rotate(x, cos, sin):
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + rotated * sin


def active_experts(arch: Architecture, tokens: int) -> int:
    """Experts that get tokens when `tokens` tokens are routed evenly (each to per_token experts)."""
    e = arch.experts
    return min(e.count, tokens * e.per_token)


class Experts(nn.Module):
    """One rank's slice of every expert (1/tp of each expert's hidden units), the router and the shared
    expert. Tokens are gathered per expert, run as one grouped matmul (bmm) over the experts that have
    tokens, and added back weighted by their router scores. `blocks` (tokens -> (blocks, rows of each, kernel) or
    None; stacks.moe_prefill_blocks): a prompt of a stack that encodes it block by block runs the grouped matmul over
    those blocks, each its expert's, however few of their rows the routed tokens fill; with `kernel`, as the NKI
    Library's MoE kernel runs them, one op timed whole (costmodel/moe_blocks.py)."""
    def __init__(self, arch: Architecture, tp: int, blocks=None):
        super().__init__()
        e = arch.experts
        self.arch, self.inner, self.blocks = arch, shard(e.intermediate, tp), blocks
        self.router = nn.Linear(arch.hidden, e.count, bias=False)   # replicated: every rank routes all tokens
        self.up = nn.Parameter(torch.empty(e.count, arch.hidden, 2 * self.inner))
        self.down = nn.Parameter(torch.empty(e.count, self.inner, arch.hidden))
        self.shared = Mlp(arch, tp, e.shared_intermediate) if e.shared_intermediate else None

    def forward(self, x):
        flat = x.flatten(0, -2)
        tokens, k = flat.shape[0], self.arch.experts.per_token
        scores, _ = torch.topk(torch.softmax(self.router(flat).float(), dim=-1), k, dim=-1)
        active = active_experts(self.arch, tokens)
        per_expert = math.ceil(tokens * k / active)
        blocked = self.blocks(tokens) if self.blocks is not None else None
        if blocked:
            active, per_expert, kernel = blocked
            if kernel:
                # the NKI Library's context-encoding MoE kernel, block after block (costmodel/moe_blocks.py): its
                # token positions (per_expert rows a block) and each block's expert; the output it accumulates into
                positions = torch.zeros(active * per_expert, dtype=torch.int32, device=x.device)
                experts = torch.zeros(active, 1, dtype=torch.int32, device=x.device)
                combined = torch.zeros_like(flat)
                record_kernel(moe_blocks.OP, [flat, self.up, self.down, positions, experts], [combined])
                if self.shared is not None:
                    combined = combined + self.shared.inner_forward(flat)
                return combined.view_as(x)
        # where each routed copy of a token goes (which token, which expert): the shapes are what counts
        slots = torch.zeros(active * per_expert, dtype=torch.int32, device=x.device)
        which = torch.zeros(active, dtype=torch.int32, device=x.device)
        routed = flat.index_select(0, slots).view(active, per_expert, -1)
        gate, up = torch.bmm(routed, self.up.index_select(0, which)).chunk(2, dim=-1)
        out = torch.bmm(F.silu(gate) * up, self.down.index_select(0, which))
        weights = scores.flatten().index_select(0, slots).to(x.dtype).unsqueeze(-1)
        combined = torch.zeros_like(flat).index_add(0, slots, out.flatten(0, 1) * weights)
        if self.shared is not None:
            combined = combined + self.shared.inner_forward(flat)
        return combined.view_as(x)


class Mlp(nn.Module):
    """A dense MLP shard: column-parallel up (gated: gate and up), row-parallel down."""
    def __init__(self, arch: Architecture, tp: int, intermediate: int | None = None):
        super().__init__()
        self.gated = arch.gated
        self.inner = shard(intermediate or arch.intermediate, tp)
        self.up = nn.Linear(arch.hidden, (2 if self.gated else 1) * self.inner, bias=arch.mlp_bias)
        self.down = nn.Linear(self.inner, arch.hidden, bias=arch.mlp_bias)

    def activation(self, up):
        if self.gated:
            gate, up = up.chunk(2, dim=-1)
            return F.silu(gate) * up
        return F.gelu(up, approximate="tanh")

    def inner_forward(self, x):
        """On a replicated input (inside the MoE block, which makes its own collectives)."""
        return self.down(self.activation(self.up(x)))


def _materialised_attention(q, k, v, causal, scale):
    """Attention with no fused kernel, as a stack that materialises the scores runs it (stacks.py,
    Stack.materialises_prompt_scores): each kv head repeated for its query heads, the whole score matrix, the mask,
    the softmax in the scores' dtype and the weighted values, each its own op."""
    group = q.shape[-3] // k.shape[-3]
    if group > 1:
        k, v = k.repeat_interleave(group, dim=-3), v.repeat_interleave(group, dim=-3)
    scores = torch.matmul(q * scale, k.transpose(-1, -2))
    if causal:
        s, t = scores.shape[-2], scores.shape[-1]
        allowed = torch.ones(s, t, dtype=torch.bool, device=scores.device).tril(t - s)
        scores = torch.where(allowed, scores, torch.full((), -30000.0, dtype=scores.dtype, device=scores.device))
    return torch.matmul(torch.softmax(scores, dim=-1).to(v.dtype), v)


class LayerShard(nn.Module):
    """One layer: attention and a dense or mixture-of-experts MLP, pre-norm (decoders, ViT) or
    post-norm (BERT)."""
    def __init__(self, arch: Architecture, tp: int, sequence_parallel: bool, recompute: str, moe: bool = False,
                 moe_blocks=None, materialised_scores: bool = False):
        super().__init__()
        self.materialised_scores = materialised_scores   # a prompt's attention as separate ops (stacks.py)
        if recompute not in RECOMPUTE:
            raise ValueError(f"recompute must be one of {RECOMPUTE}, got {recompute!r}")
        self.arch, self.tp, self.sp, self.recompute = arch, tp, sequence_parallel, recompute
        self.heads = shard(arch.heads, tp)
        self.kv_heads = shard(arch.kv_heads, tp)   # one replicated kv head per rank when kv_heads < tp
        d = arch.head_dim
        self.norm1, self.norm2 = Norm(arch), Norm(arch)
        self.qkv = nn.Linear(arch.hidden, (self.heads + 2 * self.kv_heads) * d, bias=arch.attention_bias)
        self.out = nn.Linear(self.heads * d, arch.hidden, bias=arch.attention_bias)
        self.q_norm, self.k_norm = (Norm(arch, d), Norm(arch, d)) if arch.qk_norm else (None, None)
        self.mlp = Experts(arch, tp, moe_blocks) if moe else Mlp(arch, tp)
        self.post_norm = arch.family == "bert"

    def _attention_core(self, q, k, v, causal):
        # the device's fused attention (what F.scaled_dot_product_attention runs on neuron tensors); with
        # grouped-query attention k and v keep their kv heads (the op takes a group of query heads per kv head, as
        # SDPA's enable_gqa hands them: no copy repeats them), and the cost model reads the group from the operands
        dropout = self.arch.dropout if self.training else 0.0
        if self.materialised_scores and q.shape[-2] > 1:
            return _materialised_attention(q, k, v, causal, 1.0 / math.sqrt(self.arch.head_dim))
        return FUSED_ATTENTION(q, k, v, None, dropout, causal, scale=1.0 / math.sqrt(self.arch.head_dim))[0]

    def _attention(self, x, cos, sin, past):
        b = x.shape[0]
        s = x.shape[1] * (self.tp if self.sp else 1)
        d = self.arch.head_dim
        q, k, v = column_parallel(x, self.qkv, self.tp, self.sp).split(
            [self.heads * d, self.kv_heads * d, self.kv_heads * d], dim=-1)
        q = q.view(b, s, self.heads, d).transpose(1, 2)
        k = k.view(b, s, self.kv_heads, d).transpose(1, 2)
        v = v.view(b, s, self.kv_heads, d).transpose(1, 2)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if cos is not None:
            q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)
        if past is not None:             # decode: the new token's k/v join the cache
            k = torch.cat((past[0], k), dim=2)
            v = torch.cat((past[1], v), dim=2)
        causal = self.arch.causal and past is None and s > 1
        if self.recompute == "selective" and self.training:
            attended = checkpoint(self._attention_core, q, k, v, causal, use_reentrant=False)
        else:
            attended = self._attention_core(q, k, v, causal)
        return self.out(attended.transpose(1, 2).reshape(b, s, self.heads * d))

    def _mlp(self, x):
        if isinstance(self.mlp, Experts):
            # every rank routes the whole (gathered) sequence through its slice of the experts
            return self.mlp(enter_parallel_region(x, self.tp, self.sp))
        up = column_parallel(x, self.mlp.up, self.tp, self.sp)
        return self.mlp.down(self.mlp.activation(up))

    def _block(self, x, cos, sin, past):
        p = self.arch.dropout if self.training else 0.0
        if self.post_norm:
            attended = leave_parallel_region(self._attention(x, cos, sin, past), self.tp, self.sp)
            x = self.norm1(x + F.dropout(attended, p, self.training))
            return self.norm2(x + F.dropout(leave_parallel_region(self._mlp(x), self.tp, self.sp), p, self.training))
        attended = self._attention(self.norm1(x), cos, sin, past)
        x = x + F.dropout(leave_parallel_region(attended, self.tp, self.sp), p, self.training)
        return x + F.dropout(leave_parallel_region(self._mlp(self.norm2(x)), self.tp, self.sp), p, self.training)

    def forward(self, x, cos=None, sin=None, past=None):
        if self.recompute == "full" and self.training:
            return checkpoint(self._block, x, cos, sin, past, use_reentrant=False)
        return self._block(x, cos, sin, past)


class EmbeddingShard(nn.Module):
    """Vocabulary-parallel token embedding (each rank holds vocab/tp rows), plus learned positions (GPT,
    BERT: with the token types) or, for ViT, the patch projection, class token and positions."""
    def __init__(self, arch: Architecture, tp: int, sequence_parallel: bool):
        super().__init__()
        self.arch, self.tp, self.sp = arch, tp, sequence_parallel
        self.tokens = nn.Embedding(shard(arch.vocab, tp), arch.hidden) if arch.vocab else None
        self.patches = nn.Linear(arch.patch_inputs, arch.hidden) if arch.patch_inputs else None
        self.positions = nn.Embedding(arch.positions, arch.hidden) if arch.positions else None
        self.norm = Norm(arch) if arch.family == "bert" else None

    def forward(self, ids):
        if self.patches is not None:   # ids: the image as patches (batch, patches, pixel values)
            x = self.patches(ids)
            x = torch.cat((x[:, :1], x), dim=1)   # the class token leads
        else:
            x = self.tokens(ids)
        if self.positions is not None:
            x = x + self.positions(torch.arange(x.shape[1], device=x.device))
        if self.norm is not None:
            x = self.norm(x)
        if self.tokens is not None:
            x = leave_parallel_region(x, self.tp, self.sp)
        elif self.sp and self.tp > 1:   # replicated patch embedding: each rank keeps its slice of the sequence
            x = x[:, :x.shape[1] // self.tp]
        return x


class HeadShard(nn.Module):
    """What follows the last layer: the final norm and the vocabulary-parallel output projection with,
    training, the cross-entropy loss (causal LMs); BERT's masked-LM transform before it; ViT's class-token
    classifier."""
    def __init__(self, arch: Architecture, tp: int, sequence_parallel: bool):
        super().__init__()
        self.arch, self.tp, self.sp = arch, tp, sequence_parallel
        self.norm = Norm(arch) if arch.family != "bert" else None
        self.transform = nn.Linear(arch.hidden, arch.hidden) if arch.family == "bert" else None
        self.transform_norm = Norm(arch) if arch.family == "bert" else None
        outputs = shard(arch.vocab, tp) if arch.vocab else 1000
        self.project = nn.Linear(arch.hidden, outputs, bias=arch.family in ("bert", "vit"))

    def forward(self, x, labels=None):
        if self.arch.family == "vit":
            logits = self.project(self.norm(x[:, 0]))
            return logits if labels is None else F.cross_entropy(logits.float(), labels[:, 0] % logits.shape[-1])
        if self.transform is not None:
            x = self.transform_norm(F.gelu(self.transform(x)))
        else:
            x = self.norm(x)
        logits = column_parallel(x, self.project, self.tp, self.sp)
        if labels is None:
            return logits
        vocabulary_parallel_loss(labels.numel(), self.tp if self.arch.vocab else 1)
        return F.cross_entropy(logits.float().flatten(0, 1), labels.flatten())
