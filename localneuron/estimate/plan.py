"""The estimate of a decoder-only transformer at full size: one layer shard (and the embedding and
head shards) traced once, priced as compiled graphs, then repeated over the layers, the micro-batches
of a 1F1B pipeline and the data-parallel replicas; HBM per core against capacity.

Training assumes what the Megatron-style stacks that published Trainium results do: bf16 compute,
sequence parallelism whenever tp > 1, selective activation recompute (the attention core is recomputed
in the backward), fp32 gradient accumulation and AdamW with fp32 master weights and moments.
Inference runs the whole model as one compiled graph per forward (one launch per token).
MFU counts the model's matmul FLOPs (6 per weight and token, plus attention over the full sequence)
against the TensorE peak of the cores used (128 x 128 PEs x 2 FLOP x clock per physical core).
"""
import math
from dataclasses import dataclass

import torch

from localneuron.costmodel import collectives
from localneuron.costmodel.assumptions import RULES, TENSOR_ENGINE_EFFICIENCY
from localneuron.costmodel.time import Breakdown
from localneuron.estimate.architecture import Architecture, shard
from localneuron.estimate.builder import DecoderLayerShard, EmbeddingShard, HeadShard
from localneuron.estimate.layout import Layout
from localneuron.estimate.trace import cast
from localneuron.estimate.traced import TracedModule, trace_module

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
GRADIENT_BYTES = 4                               # gradients accumulate in fp32 over the micro-batches
OPTIMIZER_BYTES = {"bf16": 12, "fp32": 8}        # AdamW: fp32 master copy (bf16 only) + two fp32 moments
# AdamW's update streams every local parameter once: reads gradient, master, moments; writes master,
# moments and (bf16) the working copy.
OPTIMIZER_STEP_BYTES = {"bf16": 4 * 4 + 3 * 4 + 2, "fp32": 4 * 4 + 3 * 4}


class RequestError(ValueError):
    """Batch sizes or lengths that do not make a run."""


@dataclass(frozen=True)
class Request:
    mode: str                 # train | prefill | decode
    dtype: str = "bf16"
    micro_batch: int = 1
    global_batch: int | None = None
    seq: int = 2048
    batch: int = 1
    input_len: int = 128
    output_len: int = 128
    zero1: bool = False
    recompute: str = "selective"


def _empty(*shape, dtype, grad=False):
    return torch.empty(shape, dtype=dtype, device="neuron", requires_grad=grad)


def _rotary(arch: Architecture, length: int, dtype):
    if arch.family != "llama":
        return None, None
    table = _empty(1, 1, length, arch.head_dim, dtype=dtype)
    return table, table


def _collectives_time(layout: Layout, traced: TracedModule) -> float:
    group = layout.tensor_group()
    return sum(collectives.KINDS[kind](layout.chip, nbytes, group)
               for calls in traced.collectives.values() for kind, nbytes in calls)


def _per_pass(layout: Layout, traced: TracedModule) -> Breakdown:
    return traced.forward + traced.backward + Breakdown(collectives=_collectives_time(layout, traced))


def _build(module_type, *args, dtype):
    with torch.device("neuron"):
        return cast(module_type(*args), dtype)


def _memory(parameters=0, gradients=0, optimizer=0, activations=0, kv_cache=0) -> dict:
    parts = {"parameters": int(parameters), "gradients": int(gradients), "optimizer_state": int(optimizer),
             "activations": int(activations), "kv_cache": int(kv_cache)}
    return {**parts, "total": sum(parts.values())}


@dataclass
class Stack:
    """One tensor-parallel rank's model as a pipeline sees it, traced once per kind of part: a layer
    repeated `layers` times, what only the first stage runs (embedding) and what only the last runs
    (final norm, output head, loss). However the model was built, the schedules below price it."""
    layers: int
    layer: TracedModule
    first: TracedModule
    last: TracedModule
    boundary_bytes: int        # the activation one micro-batch sends to the next stage
    model_flops: float         # forward matmul FLOPs of one micro-batch through the whole model (all ranks)


def _stage(stack: Stack, layout: Layout) -> tuple[Breakdown, int, int]:
    """(one micro-batch's forward and backward on the slowest stage, that stage's parameters, layers per stage)"""
    layers_per_stage = math.ceil(stack.layers / layout.pp)
    layer_pass = _per_pass(layout, stack.layer).scaled(layers_per_stage)
    first, last = layer_pass + _per_pass(layout, stack.first), layer_pass + _per_pass(layout, stack.last)
    layers = layers_per_stage * stack.layer.parameter_count
    if layout.pp == 1:
        return first + _per_pass(layout, stack.last), layers + stack.first.parameter_count + stack.last.parameter_count, \
            layers_per_stage
    stage = max(first, last, key=lambda t: t.total)
    return stage, layers + max(stack.first.parameter_count, stack.last.parameter_count), layers_per_stage


def micro_batches(layout: Layout, request: Request) -> tuple[int, int]:
    """(global batch, micro-batches per step and replica)"""
    global_batch = request.global_batch or request.micro_batch * layout.dp
    if global_batch % (request.micro_batch * layout.dp):
        raise RequestError(f"--global-batch {global_batch} is not a multiple of micro-batch x dp = "
                           f"{request.micro_batch} x {layout.dp}")
    return global_batch, global_batch // (request.micro_batch * layout.dp)


def schedule_train(stack: Stack, layout: Layout, request: Request) -> dict:
    """A training step: 1F1B over the pipeline stages, fp32 gradient accumulation, the data-parallel
    gradient reduction and AdamW (ZeRO-1 optionally)."""
    chip, pp, dp = layout.chip, layout.pp, layout.dp
    dtype = DTYPES[request.dtype]
    global_batch, micro = micro_batches(layout, request)
    stage, stage_parameters, layers_per_stage = _stage(stack, layout)
    if pp > 1:   # the activation goes forward and its gradient comes back, once per micro-batch
        across = layout.stage_boundary_crosses_instances()
        concurrent = layout.per_instance if across else 1
        stage.collectives += 2 * collectives.send_recv(chip, stack.boundary_bytes, across, concurrent)
    # each micro-batch's backward adds its gradients into the fp32 accumulator instead of writing them:
    # read and write 4 bytes per parameter instead of writing dtype bytes
    stage.memory += stage_parameters * (2 * GRADIENT_BYTES - dtype.itemsize) / chip.memory_bytes_per_s_per_core
    step = stage.scaled(micro)
    step.pipeline_bubble = (pp - 1) * stage.total

    local_optimizer_parameters = stage_parameters / (dp if request.zero1 else 1)
    data_group = layout.data_group()
    if request.zero1:
        step.collectives += collectives.reduce_scatter(chip, stage_parameters * GRADIENT_BYTES, data_group)
        step.collectives += collectives.all_gather(chip, stage_parameters * dtype.itemsize, data_group)
    else:
        step.collectives += collectives.all_reduce(chip, stage_parameters * GRADIENT_BYTES, data_group)
    step.memory += local_optimizer_parameters * OPTIMIZER_STEP_BYTES[request.dtype] / chip.memory_bytes_per_s_per_core
    step.launches += chip.launch_overhead_s

    in_flight = min(pp, micro)   # 1F1B: the first stage holds pp micro-batches' activations
    activations = in_flight * (layers_per_stage * stack.layer.saved_bytes + stack.first.saved_bytes) + max(
        stack.layer.workspace_bytes, stack.last.workspace_bytes + stack.last.saved_bytes)
    memory = _memory(stage_parameters * dtype.itemsize, stage_parameters * GRADIENT_BYTES,
                     local_optimizer_parameters * OPTIMIZER_BYTES[request.dtype], activations)
    step_s = step.total
    model_flops = 3 * stack.model_flops * micro * dp
    return {
        "step_s": step_s, "seq_per_s": global_batch / step_s,
        "tokens_per_s": global_batch * request.seq / step_s,
        "mfu": model_flops / step_s / (layout.world * chip.bf16_flops_per_core),
        "micro_batches_per_step": micro, "global_batch": global_batch,
        "micro_batch_stage_s": stage.total,   # one micro-batch's forward and backward on the slowest stage
        "breakdown": step.as_dict(), "hbm_per_core_bytes": memory,
        "compile_saves": _compile_saving(stack.layer, layers_per_stage * micro),
        "traced": [stack.layer, stack.first, stack.last],
    }


def train(arch: Architecture, layout: Layout, request: Request) -> dict:
    """The Megatron-style layout of localneuron's own builder (sequence parallel when tp > 1)."""
    chip, tp = layout.chip, layout.tp
    dtype = DTYPES[request.dtype]
    micro_batches(layout, request)   # checks the batch sizes before tracing
    sequence_parallel = tp > 1
    if sequence_parallel and request.seq % tp:
        raise RequestError(f"--seq {request.seq} must be a multiple of --tp {tp} (sequence parallelism)")
    local_seq = request.seq // tp if sequence_parallel else request.seq
    b, s, h = request.micro_batch, request.seq, arch.hidden

    layer = _build(DecoderLayerShard, arch, tp, sequence_parallel, request.recompute, dtype=dtype)
    cos, sin = _rotary(arch, s, dtype)
    traced_layer = trace_module(chip, layer, (_empty(b, local_seq, h, dtype=dtype, grad=True),), (cos, sin), train=True)
    embedding = _build(EmbeddingShard, arch, tp, sequence_parallel, s, dtype=dtype)
    traced_embedding = trace_module(chip, embedding, (_empty(b, s, dtype=torch.int64),), train=True)
    head = _build(HeadShard, arch, tp, sequence_parallel, dtype=dtype)
    traced_head = trace_module(chip, head, (_empty(b, local_seq, h, dtype=dtype, grad=True),),
                               (_empty(b, s, dtype=torch.int64),), train=True)
    stack = Stack(arch.layers, traced_layer, traced_embedding, traced_head,
                  boundary_bytes=b * local_seq * h * dtype.itemsize, model_flops=arch.flops_per_token(s) * b * s)
    return schedule_train(stack, layout, request)


def _compile_saving(traced: TracedModule, repeats: int) -> dict:
    return {"eager_forward_s": traced.eager_forward.total * repeats, "compiled_forward_s": traced.forward.total * repeats}


def schedule_forward(stack: Stack, layout: Layout) -> Breakdown:
    """One inference forward through every stage: the whole model is one compiled graph (one launch)."""
    total = _per_pass(layout, stack.layer).scaled(stack.layers) + _per_pass(layout, stack.first) + \
        _per_pass(layout, stack.last)
    if layout.pp > 1:
        total.collectives += (layout.pp - 1) * collectives.send_recv(
            layout.chip, stack.boundary_bytes, layout.stage_boundary_crosses_instances())
    total.launches = layout.chip.launch_overhead_s
    return total


def schedule_inference(prefill: Stack, decode: Stack | None, layout: Layout, request: Request,
                       kv_cache_bytes: int) -> dict:
    """Time to first token (the prefill) and, decoding, time per output token; HBM of the first stage.
    `decode` is the step at the mean context (decode cost grows linearly with it, so the mean token
    sits at the middle of the output); `kv_cache_bytes` is one stage's cache at the full length."""
    dtype = DTYPES[request.dtype]
    first = schedule_forward(prefill, layout)
    layers_per_stage = math.ceil(prefill.layers / layout.pp)
    stage_parameters = layers_per_stage * prefill.layer.parameter_count + prefill.first.parameter_count + \
        prefill.last.parameter_count
    result = {"ttft_s": first.total, "breakdown": first.as_dict(),
              "traced": [prefill.layer, prefill.first, prefill.last],
              "compile_saves": _compile_saving(prefill.layer, prefill.layers)}
    workspace = max(prefill.layer.workspace_bytes, prefill.last.workspace_bytes)
    if decode is not None:
        step = schedule_forward(decode, layout)
        result.update(tpot_s=step.total, breakdown=step.as_dict(), tokens_per_s=request.batch / step.total,
                      prefill_breakdown=first.as_dict(), traced=result["traced"] + [decode.layer])
        workspace = max(workspace, decode.layer.workspace_bytes)
    result["hbm_per_core_bytes"] = _memory(stage_parameters * dtype.itemsize, activations=workspace,
                                           kv_cache=kv_cache_bytes)
    return result


def _inference_stack(arch: Architecture, layout: Layout, request: Request, new_tokens: int, context: int) -> Stack:
    """One forward of `new_tokens` per sequence attending to `context` cached tokens."""
    chip, tp = layout.chip, layout.tp
    dtype = DTYPES[request.dtype]
    b, h = request.batch, arch.hidden
    layer = _build(DecoderLayerShard, arch, tp, False, "none", dtype=dtype)
    cos, sin = _rotary(arch, new_tokens, dtype)
    past = None
    if context:
        cache = _empty(b, shard(arch.kv_heads, tp), context, arch.head_dim, dtype=dtype)
        past = (cache, cache.clone())
    traced_layer = trace_module(chip, layer, (_empty(b, new_tokens, h, dtype=dtype),), (cos, sin, past),
                                kv_cache=past or ())
    traced_embedding = trace_module(chip, _build(EmbeddingShard, arch, tp, False, new_tokens, dtype=dtype),
                                    (_empty(b, new_tokens, dtype=torch.int64),))
    # the next token needs the logits of the last position only
    traced_head = trace_module(chip, _build(HeadShard, arch, tp, False, dtype=dtype), (_empty(b, 1, h, dtype=dtype),))
    return Stack(arch.layers, traced_layer, traced_embedding, traced_head,
                 boundary_bytes=b * new_tokens * h * dtype.itemsize,
                 model_flops=arch.flops_per_token(context + new_tokens) * b * new_tokens)


def inference(arch: Architecture, layout: Layout, request: Request) -> dict:
    dtype = DTYPES[request.dtype]
    prefill = _inference_stack(arch, layout, request, request.input_len, 0)
    decode = None
    total_len = request.input_len
    if request.mode == "decode":
        decode = _inference_stack(arch, layout, request, 1, request.input_len + request.output_len // 2)
        total_len += request.output_len
    layers_per_stage = math.ceil(arch.layers / layout.pp)
    kv_cache = 2 * layers_per_stage * request.batch * shard(arch.kv_heads, layout.tp) * total_len * arch.head_dim * \
        dtype.itemsize
    return schedule_inference(prefill, decode, layout, request, kv_cache)


def assumptions() -> list[str]:
    return [f"TensorE reaches {TENSOR_ENGINE_EFFICIENCY:.0%} of its tile rate on well-blocked matmuls "
            "(the published NKI GEMM)", *RULES]
