"""The schedules every model source goes through: a Stack (one tensor-parallel rank's model as traced
parts) becomes a training step (1F1B pipeline, fp32 gradient accumulation, data-parallel gradient
reduction, AdamW, ZeRO-1 optionally) or an inference forward (time to first token, time per output
token), with HBM per core against capacity.

MFU counts the model's matmul FLOPs (6 per weight a token passes through, plus attention over the full
sequence) against the TensorE peak of the cores used (128 x 128 PEs x 2 FLOP x clock per physical core).
"""
import math
from dataclasses import dataclass, replace

import torch

from localneuron.costmodel import collectives
from localneuron.costmodel.time import Breakdown
from localneuron.estimate.layout import Layout
from localneuron.estimate.traced import STORED_DTYPES, TracedModule, mean

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
GRADIENT_BYTES = 4                               # gradients accumulate in fp32 over the micro-batches
OPTIMIZER_BYTES = {"bf16": 12, "fp32": 8}        # AdamW: fp32 master copy (bf16 only) + two fp32 moments
# AdamW's update streams every local parameter once: reads gradient, master, moments; writes master,
# moments and (bf16) the working copy.
OPTIMIZER_STEP_BYTES = {"bf16": 4 * 4 + 3 * 4 + 2, "fp32": 4 * 4 + 3 * 4}
MODES = ("train", "prefill", "decode")
# request fields and the most any run could use: beyond them shapes overflow (and no hardware holds it)
LIMITS = {"micro_batch": 1 << 20, "global_batch": 1 << 40, "seq": 1 << 24, "batch": 1 << 20,
          "compiled_batch": 1 << 20, "input_len": 1 << 24, "output_len": 1 << 24, "compiled_seq": 1 << 24}


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
    weights: str | None = None   # stored weight format for inference (int8, fp8); None: as dtype
    # serving: the batch the decode graph was compiled for (None: the request's batch). A served model decodes
    # every step at that batch, padding the free slots, and holds a KV cache for all of them; the prompt is
    # prefilled as the request brings it
    compiled_batch: int | None = None
    # serving: the sequence length the graphs were compiled for (None: not given). A stack that compiles for that one
    # length (costmodel/stacks.py, compiled_tokens()) encodes every prompt padded to it and attends over all of it
    compiled_seq: int | None = None

    def __post_init__(self):
        if self.mode not in MODES:
            raise RequestError(f"--mode must be one of {MODES}, got {self.mode!r}")
        if self.dtype not in DTYPES:
            raise RequestError(f"--dtype must be one of {sorted(DTYPES)}, got {self.dtype!r}")
        if self.weights is not None and self.weights not in STORED_DTYPES:
            raise RequestError(f"--weights must be one of {sorted(STORED_DTYPES)}, got {self.weights!r}")
        for name, limit in LIMITS.items():
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise RequestError(f"--{name.replace('_', '-')} must be a positive integer, got {value!r}")
            if value > limit:
                raise RequestError(f"--{name.replace('_', '-')} {value} is beyond what any run holds (at most {limit}); "
                                   f"give the size of the run you want estimated")
        if self.compiled_batch is not None and self.mode == "train":
            raise RequestError("--compiled-batch is the batch a served model's decode graph was compiled for: "
                               "give it with --mode prefill or decode (training batches: --micro-batch)")
        if self.compiled_seq is not None and self.mode == "train":
            raise RequestError("--compiled-seq is the sequence length a served model's graphs were compiled for: "
                               "give it with --mode prefill or decode (training sequences: --seq)")
        held = self.input_len + (self.output_len if self.mode == "decode" else 0)
        if self.compiled_seq is not None and self.compiled_seq < held:
            raise RequestError(f"--compiled-seq {self.compiled_seq} does not hold the request's {held} tokens "
                               f"(--input-len{' + --output-len' if self.mode == 'decode' else ''})")
        if self.compiled_batch is not None and self.compiled_batch < self.batch:
            raise RequestError(f"--batch {self.batch} does not fit a graph compiled for --compiled-batch "
                               f"{self.compiled_batch}: a served model decodes at most its compiled batch at once")

    def decoding(self) -> "Request":
        """The request a decode step runs: the compiled batch's every slot (the request's own when not given)."""
        return replace(self, batch=self.compiled_batch or self.batch)


@dataclass
class Stack:
    """One tensor-parallel rank's model as a pipeline sees it, traced once per kind of part: layers of
    one or more kinds, each repeated (`kinds`: (traced layer, how many)), what only the first stage runs
    (embedding) and what only the last runs (final norm, output head, loss); and, when the source traced
    it, the model's own optimizer step. However the model was built, the schedules below price it."""
    kinds: list
    first: TracedModule
    last: TracedModule
    boundary_bytes: int        # the activation one micro-batch sends to the next stage
    model_flops: float         # forward matmul FLOPs of one micro-batch through the whole model (all ranks)
    optimizer: TracedModule | None = None

    @property
    def layers(self) -> int:
        return sum(n for _, n in self.kinds)

    @property
    def layer(self) -> TracedModule:
        """The mean layer (a pipeline stage holds an even share of each kind)."""
        return self.kinds[0][0] if len(self.kinds) == 1 else mean(self.kinds)

    def traced(self) -> list:
        return [t for t, _ in self.kinds] + [self.first, self.last] + ([self.optimizer] if self.optimizer else [])


def collectives_time(layout: Layout, traced: TracedModule) -> float:
    """The tensor-parallel collectives one pass of `traced` issues, priced over the layout's tensor group."""
    group = layout.tensor_group()
    return sum(collectives.KINDS[kind](layout.chip, nbytes, group)
               for calls in traced.collectives.values() for kind, nbytes in calls)


def _per_pass(layout: Layout, traced: TracedModule) -> Breakdown:
    return traced.forward + traced.backward + Breakdown(collectives=collectives_time(layout, traced))


def _memory(parameters=0, gradients=0, optimizer=0, activations=0, kv_cache=0) -> dict:
    parts = {"parameters": int(parameters), "gradients": int(gradients), "optimizer_state": int(optimizer),
             "activations": int(activations), "kv_cache": int(kv_cache)}
    return {**parts, "total": sum(parts.values())}


def _stage(stack: Stack, layout: Layout) -> tuple[Breakdown, int, int, int]:
    """(one micro-batch's forward and backward on the slowest stage, that stage's parameters and their
    bytes, layers per stage)"""
    layers_per_stage = math.ceil(stack.layers / layout.pp)
    layer = stack.layer
    layer_pass = _per_pass(layout, layer).scaled(layers_per_stage)
    first, last = layer_pass + _per_pass(layout, stack.first), layer_pass + _per_pass(layout, stack.last)
    count, nbytes = layers_per_stage * layer.parameter_count, layers_per_stage * layer.parameter_bytes
    if layout.pp == 1:
        stage = first + _per_pass(layout, stack.last)
        count += stack.first.parameter_count + stack.last.parameter_count
        nbytes += stack.first.parameter_bytes + stack.last.parameter_bytes
    else:
        stage = max(first, last, key=lambda t: t.total)
        ends = max((stack.first, stack.last), key=lambda t: t.parameter_count)
        count, nbytes = count + ends.parameter_count, nbytes + ends.parameter_bytes
    # the parts were traced (and priced) as graphs of their own, a launch each; the stage runs a micro-batch as
    # two compiled graphs, its forward and the backward AOTAutograd splits from it
    stage.launches = 2 * layout.chip.launch_overhead_s
    return stage, count, nbytes, layers_per_stage


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
    stage, stage_parameters, stage_bytes, layers_per_stage = _stage(stack, layout)
    if pp > 1:   # the activation goes forward and its gradient comes back, once per micro-batch
        across = layout.stage_boundary_crosses_instances()
        concurrent = layout.per_instance if across else 1
        stage.collectives += 2 * collectives.send_recv(chip, stack.boundary_bytes, across, concurrent)
    # each micro-batch's backward adds its gradients into the fp32 accumulator instead of writing them:
    # read and write 4 bytes per parameter instead of writing dtype bytes; the first has nothing to read yet
    stage.memory += stage_parameters * (2 * GRADIENT_BYTES - dtype.itemsize) / chip.memory_bytes_per_s_per_core
    step = stage.scaled(micro)
    step.memory -= stage_parameters * GRADIENT_BYTES / chip.memory_bytes_per_s_per_core
    step.pipeline_bubble = (pp - 1) * stage.total

    local_optimizer_parameters = stage_parameters / (dp if request.zero1 else 1)
    data_group = layout.data_group()
    if request.zero1:
        step.collectives += collectives.reduce_scatter(chip, stage_parameters * GRADIENT_BYTES, data_group)
        step.collectives += collectives.all_gather(chip, stage_parameters * dtype.itemsize, data_group)
    else:
        step.collectives += collectives.all_reduce(chip, stage_parameters * GRADIENT_BYTES, data_group)
    if stack.optimizer is not None:   # the model's own optimizer, as traced
        step += stack.optimizer.forward.scaled(1 / (dp if request.zero1 else 1))
    else:
        step.memory += local_optimizer_parameters * OPTIMIZER_STEP_BYTES[request.dtype] / chip.memory_bytes_per_s_per_core
    step.launches += chip.launch_overhead_s

    in_flight = min(pp, micro)   # 1F1B: the first stage holds pp micro-batches' activations
    activations = in_flight * (layers_per_stage * stack.layer.saved_bytes + stack.first.saved_bytes) + max(
        stack.layer.workspace_bytes, stack.last.workspace_bytes + stack.last.saved_bytes)
    memory = _memory(stage_bytes, stage_parameters * GRADIENT_BYTES,
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
        "compiled_layers": (stack.layer, layers_per_stage * micro),
        "traced": stack.traced(),
    }


def compile_saving(traced: TracedModule, repeats: int) -> dict:
    """What compiling saves: `repeats` forwards of the layer launched op by op, and as compiled graphs (a schedule's
    "compiled_layers"; only an answer prices it: the op-by-op forward is a second pricing of every op)."""
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
    first = schedule_forward(prefill, layout)
    first.launches += layout.chip.efficiencies.request_s   # the serving stack's work before the forward starts
    layers_per_stage = math.ceil(prefill.layers / layout.pp)
    stage_bytes = layers_per_stage * prefill.layer.parameter_bytes + prefill.first.parameter_bytes + \
        prefill.last.parameter_bytes
    result = {"ttft_s": first.total, "breakdown": first.as_dict(),
              "prefill_tokens_per_s": request.batch * request.input_len / first.total,
              "traced": prefill.traced(), "compiled_layers": (prefill.layer, prefill.layers)}
    workspace = max(prefill.layer.workspace_bytes, prefill.last.workspace_bytes)
    if decode is not None:
        step = schedule_forward(decode, layout)
        step.launches += decode.layers * layout.chip.efficiencies.decode_layer_s  # the runtime's per-layer waits
        result.update(tpot_s=step.total, breakdown=step.as_dict(), tokens_per_s=request.batch / step.total,
                      prefill_breakdown=first.as_dict(), traced=result["traced"] + [decode.layer])
        workspace = max(workspace, decode.layer.workspace_bytes)
    result["hbm_per_core_bytes"] = _memory(stage_bytes, activations=workspace, kv_cache=kv_cache_bytes)
    return result

