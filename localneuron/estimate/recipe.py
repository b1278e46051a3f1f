"""The default model source: the model as a tuned TorchNeuron recipe runs it, built by localneuron's own
Megatron-style builder (builder.py) from the config's architecture: compiled graphs, the fused attention
kernel (grouped-query attention included), sequence parallelism whenever tp > 1 while training,
selective activation recompute (the attention core), fp32 gradient accumulation, AdamW with fp32 master
weights and moments (ZeRO-1 when asked); inference runs the whole model as one compiled graph per
forward. One layer of each kind (dense, mixture-of-experts), the embedding and the head are traced once
at full size on fake tensors and repeated by the schedules."""
import math

import torch

from localneuron.costmodel import moe_blocks as moe_block_kernel, stacks
from localneuron.estimate.architecture import Architecture, shard
from localneuron.estimate.builder import EmbeddingShard, HeadShard, LayerShard
from localneuron.estimate.layout import Layout
from localneuron.estimate.plan import DTYPES, Request, RequestError, Stack, micro_batches
from localneuron.estimate.trace import cast
from localneuron.estimate.traced import trace_module

RECIPE = ("compiled graphs, fused attention (GQA), sequence parallel with TP, {recompute} recompute, "
          "fp32 gradient accumulation, AdamW{zero1}")
SERVING = ("compiled graphs (one per forward), fused attention (GQA), sequence parallel prompts with TP, "
           "KV cache in HBM{weights}")


def describe(request: Request) -> str:
    """The recipe assumed, in one line."""
    if request.mode == "train":
        return RECIPE.format(recompute=request.recompute, zero1=" with ZeRO-1" if request.zero1 else "")
    return SERVING.format(weights=f", {request.weights} weights" if request.weights else "")


def _empty(*shape, dtype, grad=False):
    return torch.empty(shape, dtype=dtype, device="neuron", requires_grad=grad)


def _build(module_type, *args, dtype, **kwargs):
    with torch.device("neuron"):
        return cast(module_type(*args, **kwargs), dtype)


def _rotary(arch: Architecture, length: int, dtype):
    if arch.family != "llama":
        return None, None
    table = _empty(1, 1, length, arch.head_dim, dtype=dtype)
    return table, table


def _token_ids(batch: int, tokens: int):
    """Token ids for the embedding's and the loss's gathers: valid ones (which ones does not change the cost), never
    uninitialised memory, whose values a gather would refuse as out of range."""
    return torch.zeros(batch, tokens, dtype=torch.int64, device="neuron")


def _model_input(arch: Architecture, batch: int, tokens: int, dtype):
    """What the embedding takes: token ids, or (ViT) the image's patches."""
    if arch.family == "vit":
        return _empty(batch, arch.image_tokens - 1, arch.patch_inputs, dtype=dtype)
    return _token_ids(batch, tokens)


def sequence(arch: Architecture, request: Request) -> int:
    """Tokens per training sequence (ViT: the image's patches and the class token)."""
    return arch.image_tokens or request.seq


def train_stack(arch: Architecture, layout: Layout, request: Request) -> Stack:
    chip, tp = layout.chip, layout.tp
    dtype = DTYPES[request.dtype]
    micro_batches(layout, request)   # checks the batch sizes before tracing
    s = sequence(arch, request)
    sequence_parallel = tp > 1
    if sequence_parallel and s % tp:
        raise RequestError(f"--seq {s} must be a multiple of --tp {tp} (sequence parallelism)")
    local_seq = s // tp if sequence_parallel else s
    b, h = request.micro_batch, arch.hidden
    cos, sin = _rotary(arch, s, dtype)
    kinds = []
    for kind, count in arch.kinds.items():
        layer = _build(LayerShard, arch, tp, sequence_parallel, request.recompute, moe=kind == "moe", dtype=dtype)
        kinds.append((trace_module(chip, layer, (_empty(b, local_seq, h, dtype=dtype, grad=True),), (cos, sin),
                                   train=True), count))
    embedding = _build(EmbeddingShard, arch, tp, sequence_parallel, dtype=dtype)
    traced_embedding = trace_module(chip, embedding, (_model_input(arch, b, s, dtype),), train=True)
    head = _build(HeadShard, arch, tp, sequence_parallel, dtype=dtype)
    traced_head = trace_module(chip, head, (_empty(b, local_seq, h, dtype=dtype, grad=True),), (_token_ids(b, s),),
                               train=True)
    return Stack(kinds, traced_embedding, traced_head, boundary_bytes=b * local_seq * h * dtype.itemsize,
                 model_flops=arch.flops_per_token(s) * b * s)


def inference_stack(arch: Architecture, layout: Layout, request: Request, new_tokens: int, context: int,
                    sequence_parallel: bool = False) -> Stack:
    """One forward of `new_tokens` per sequence attending to `context` cached tokens; with
    `sequence_parallel` (a prompt, tp > 1) the norms and residuals of each rank run on its slice of the
    tokens, the tensor-parallel all-reduces becoming reduce-scatters and all-gathers."""
    if not arch.causal and (context or request.mode == "decode"):
        raise RequestError(f"--mode decode generates tokens; {arch.model_type} is an encoder (use --mode train, or "
                           f"--mode prefill for one forward)")
    chip, tp = layout.chip, layout.tp
    dtype = DTYPES[request.dtype]
    b, h = request.batch, arch.hidden
    sequence_parallel = sequence_parallel and tp > 1 and new_tokens >= tp
    local = math.ceil(new_tokens / tp) if sequence_parallel else new_tokens
    tokens = local * tp if sequence_parallel else new_tokens   # padded up to a multiple of tp
    cos, sin = _rotary(arch, tokens, dtype)
    past = None
    if context:
        cache = _empty(b, shard(arch.kv_heads, tp), context, arch.head_dim, dtype=dtype)
        past = (cache, cache.clone())
    moe_blocks = None
    if arch.experts and not context:
        # a prompt's MoE layers as the stack encodes them (stacks.moe_prefill_blocks); on a chip the NKI Library's
        # MoE kernel is written for, at sizes and in the dtype it takes (bf16 weights), as that kernel runs them
        inner = shard(arch.experts.intermediate, tp)
        kernel = (dtype == torch.bfloat16 and not request.weights and moe_block_kernel.runs(arch.hidden, inner)
                  and moe_block_kernel.kernel_seconds(chip.name, chip.lnc, arch.hidden, inner, 1) is not None)

        def moe_blocks(routed_tokens):
            blocked = stacks.moe_prefill_blocks(chip.stack, routed_tokens, arch.experts.count, arch.experts.per_token)
            return blocked and (*blocked, kernel)
    kinds = []
    for kind, count in arch.kinds.items():
        layer = _build(LayerShard, arch, tp, sequence_parallel, "none", moe=kind == "moe", moe_blocks=moe_blocks,
                       materialised_scores=not context and stacks.STACKS[chip.stack].materialises_prompt_scores,
                       dtype=dtype)
        kinds.append((trace_module(chip, layer, (_empty(b, local, h, dtype=dtype),), (cos, sin, past),
                                   kv_cache=past or (), weights=request.weights), count))
    traced_embedding = trace_module(chip, _build(EmbeddingShard, arch, tp, sequence_parallel, dtype=dtype),
                                    (_model_input(arch, b, tokens, dtype),))
    # the next token needs the logits of the last position only
    traced_head = trace_module(chip, _build(HeadShard, arch, tp, False, dtype=dtype), (_empty(b, 1, h, dtype=dtype),),
                               weights=request.weights)
    return Stack(kinds, traced_embedding, traced_head, boundary_bytes=b * local * h * dtype.itemsize,
                 model_flops=arch.flops_per_token(context + new_tokens) * b * new_tokens)


def kv_cache_bytes(arch: Architecture, layout: Layout, request: Request, tokens: int) -> int:
    """One pipeline stage's KV cache holding `tokens` per sequence."""
    layers_per_stage = math.ceil(arch.layers / layout.pp)
    return 2 * layers_per_stage * request.batch * shard(arch.kv_heads, layout.tp) * tokens * arch.head_dim * \
        DTYPES[request.dtype].itemsize
