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


def train(arch: Architecture, layout: Layout, request: Request) -> dict:
    chip, tp, pp, dp = layout.chip, layout.tp, layout.pp, layout.dp
    dtype = DTYPES[request.dtype]
    global_batch = request.global_batch or request.micro_batch * dp
    if global_batch % (request.micro_batch * dp):
        raise RequestError(f"--global-batch {global_batch} is not a multiple of micro-batch x dp = "
                           f"{request.micro_batch} x {dp}")
    micro_batches = global_batch // (request.micro_batch * dp)
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

    layers_per_stage = math.ceil(arch.layers / pp)
    layer_pass = _per_pass(layout, traced_layer)
    first = layer_pass.scaled(layers_per_stage) + _per_pass(layout, traced_embedding)
    last = layer_pass.scaled(layers_per_stage) + _per_pass(layout, traced_head)
    stage = first + _per_pass(layout, traced_head) if pp == 1 else max(first, last, key=lambda t: t.total)
    if pp > 1:   # the activation goes forward and its gradient comes back, once per micro-batch
        nbytes = b * local_seq * h * dtype.itemsize
        across = layout.stage_boundary_crosses_instances()
        concurrent = layout.per_instance if across else 1
        stage.collectives += 2 * collectives.send_recv(chip, nbytes, across, concurrent)
    layer_parameters = traced_layer.parameter_count
    stage_parameters = layers_per_stage * layer_parameters + (
        traced_embedding.parameter_count + traced_head.parameter_count if pp == 1
        else max(traced_embedding.parameter_count, traced_head.parameter_count))
    # each micro-batch's backward adds its gradients into the fp32 accumulator instead of writing them:
    # read and write 4 bytes per parameter instead of writing dtype bytes
    stage.memory += stage_parameters * (2 * GRADIENT_BYTES - dtype.itemsize) / chip.memory_bytes_per_s_per_core
    step = stage.scaled(micro_batches)
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

    in_flight = min(pp, micro_batches)   # 1F1B: the first stage holds pp micro-batches' activations
    activations = in_flight * (layers_per_stage * traced_layer.saved_bytes + traced_embedding.saved_bytes) + max(
        traced_layer.workspace_bytes, traced_head.workspace_bytes + traced_head.saved_bytes)
    memory = _memory(stage_parameters * dtype.itemsize, stage_parameters * GRADIENT_BYTES,
                     local_optimizer_parameters * OPTIMIZER_BYTES[request.dtype], activations)
    step_s = step.total
    model_flops = 3 * arch.flops_per_token(s) * global_batch * s
    return {
        "step_s": step_s, "seq_per_s": global_batch / step_s, "tokens_per_s": global_batch * s / step_s,
        "mfu": model_flops / step_s / (layout.world * chip.bf16_flops_per_core),
        "micro_batches_per_step": micro_batches, "global_batch": global_batch,
        "micro_batch_stage_s": stage.total,   # one micro-batch's forward and backward on the slowest stage
        "breakdown": step.as_dict(), "hbm_per_core_bytes": memory,
        "compile_saves": _compile_saving(traced_layer, layers_per_stage * micro_batches),
        "traced": [traced_layer, traced_embedding, traced_head],
    }


def _compile_saving(traced: TracedModule, repeats: int) -> dict:
    return {"eager_forward_s": traced.eager_forward.total * repeats, "compiled_forward_s": traced.forward.total * repeats}


def _inference_pass(arch: Architecture, layout: Layout, request: Request, new_tokens: int, context: int):
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
    traced_layer = trace_module(chip, layer, (_empty(b, new_tokens, h, dtype=dtype),), (cos, sin, past))
    traced_embedding = trace_module(chip, _build(EmbeddingShard, arch, tp, False, new_tokens, dtype=dtype),
                                    (_empty(b, new_tokens, dtype=torch.int64),))
    # the next token needs the logits of the last position only
    traced_head = trace_module(chip, _build(HeadShard, arch, tp, False, dtype=dtype), (_empty(b, 1, h, dtype=dtype),))
    total = (_per_pass(layout, traced_layer).scaled(arch.layers) + _per_pass(layout, traced_embedding)
             + _per_pass(layout, traced_head))
    if layout.pp > 1:
        nbytes = b * new_tokens * h * dtype.itemsize
        total.collectives += (layout.pp - 1) * collectives.send_recv(chip, nbytes, layout.stage_boundary_crosses_instances())
    total.launches = chip.launch_overhead_s   # the whole forward is one compiled graph
    return total, traced_layer, traced_embedding, traced_head


def inference(arch: Architecture, layout: Layout, request: Request) -> dict:
    dtype = DTYPES[request.dtype]
    prefill, traced_layer, traced_embedding, traced_head = _inference_pass(arch, layout, request, request.input_len, 0)
    layers_per_stage = math.ceil(arch.layers / layout.pp)
    stage_parameters = layers_per_stage * traced_layer.parameter_count + traced_embedding.parameter_count + \
        traced_head.parameter_count
    total_len = request.input_len + (request.output_len if request.mode == "decode" else 0)
    kv_cache = 2 * layers_per_stage * request.batch * shard(arch.kv_heads, layout.tp) * total_len * arch.head_dim * \
        dtype.itemsize
    result = {"ttft_s": prefill.total, "breakdown": prefill.as_dict(),
              "traced": [traced_layer, traced_embedding, traced_head],
              "compile_saves": _compile_saving(traced_layer, arch.layers)}
    workspace = traced_layer.workspace_bytes
    if request.mode == "decode":
        # decode cost grows linearly with the context, so the mean token sits at the middle of the output
        context = request.input_len + request.output_len // 2
        decode, traced_layer, *_ = _inference_pass(arch, layout, request, 1, context)
        result.update(tpot_s=decode.total, breakdown=decode.as_dict(),
                      tokens_per_s=request.batch / decode.total,
                      prefill_breakdown=prefill.as_dict(), traced=result["traced"] + [traced_layer])
        workspace = max(workspace, traced_layer.workspace_bytes)
    result["hbm_per_core_bytes"] = _memory(stage_parameters * dtype.itemsize, activations=workspace, kv_cache=kv_cache)
    return result


def assumptions() -> list[str]:
    return [f"TensorE reaches {TENSOR_ENGINE_EFFICIENCY:.0%} of its tile rate on well-blocked matmuls "
            "(the published NKI GEMM)", *RULES]
