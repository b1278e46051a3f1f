"""`--model-fn module:function`: any PyTorch model. Tensor parallelism follows the plan the model declares
(tensor_parallel.py); pipeline stages split its largest nn.ModuleList evenly; decode uses a
transformers-style cache.

The factory returns (model, example inputs). It runs on fake neuron tensors, so nothing is
allocated; the model then does what a training script does -- two steps of forward, backward and
AdamW (the second with the optimizer state in place, as every later step) -- or one forward, traced
op by op. Memory is the trace's peak of live tensors, what torch.neuron.max_memory_allocated()
reports for the same run; time prices the forward, the backward and the optimizer step each as one
compiled graph.
"""
import importlib
import importlib.util
from pathlib import Path

import torch
from torch.utils._pytree import tree_flatten, tree_map

from localneuron.costmodel import collectives
from localneuron.costmodel import ops as cost_ops
from localneuron.costmodel.engines import op_work
from localneuron.costmodel.hardware import Chip
from localneuron.costmodel.time import Breakdown
from localneuron.estimate import plan, tensor_parallel
from localneuron.estimate.hf import cache_tensors
from localneuron.estimate.layout import Layout
from localneuron.estimate.trace import Trace, cast, fake_device


def load(spec: str):
    module_name, sep, function_name = spec.rpartition(":")
    if not sep or not module_name or not function_name:
        raise ValueError(f"--model-fn {spec!r}: expected module:function (or path/to/file.py:function)")
    if module_name.endswith(".py"):
        path = Path(module_name)
        if not path.is_file():
            raise ValueError(f"--model-fn {spec!r}: no such file {module_name}")
        loader = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
    else:
        module = importlib.import_module(module_name)
    fn = getattr(module, function_name, None)
    if not callable(fn):
        raise ValueError(f"--model-fn {spec!r}: {module_name} has no function {function_name!r}")
    return fn


def build(fn, dtype: torch.dtype):
    """The factory's model and inputs as fake neuron tensors, floating point ones in `dtype`."""
    with torch.device("neuron"):
        made = fn()
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module)):
        raise ValueError("--model-fn must return (model, example_inputs): an nn.Module and a tensor or tuple of tensors")
    model, inputs = made
    inputs = inputs if isinstance(inputs, (tuple, list)) else (inputs,)

    def to_device(t):
        if not isinstance(t, torch.Tensor):
            return t
        return t.to(device="neuron", dtype=dtype if t.is_floating_point() else t.dtype)
    if any(p.device.type != "neuron" for p in model.parameters()):
        raise ValueError("--model-fn: create the model without an explicit device (the estimate builds it on "
                         "fake neuron tensors)")
    return cast(model, dtype), tuple(tree_map(to_device, list(inputs)))


def _loss(out):
    first = tree_flatten(out)[0][0]
    return first if first.dim() == 0 else first.float().sum()


def estimate(spec: str, chip: Chip, layout: Layout, request: plan.Request) -> dict:
    with fake_device():
        return _estimate(spec, chip, layout, request)


def _stage_blocks(model: torch.nn.Module, pp: int) -> torch.nn.ModuleList | None:
    """The layer stack pipeline stages split: the model's largest nn.ModuleList."""
    if pp == 1:
        return None
    lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
    blocks = max(lists, key=len, default=None)
    if blocks is None or len(blocks) < pp:
        raise ValueError(f"--pp {pp} with --model-fn splits the model's largest nn.ModuleList into stages; this "
                         f"model has {'none' if blocks is None else f'one of {len(blocks)} blocks'}")
    return blocks


def _decode(model, inputs):
    """Prefill the example inputs with a cache, then one new token: a transformers-style forward."""
    try:
        out = model(*inputs, use_cache=True)
    except TypeError as error:
        raise ValueError(f"--mode decode with --model-fn needs a transformers-style forward(input_ids, "
                         f"past_key_values=..., use_cache=True); this model's forward refused: {error}") from None
    cache = getattr(out, "past_key_values", None)
    if cache is None:
        raise ValueError("--mode decode with --model-fn: the model's output has no past_key_values to decode from")
    return cache


def _estimate(spec: str, chip: Chip, layout: Layout, request: plan.Request) -> dict:
    model, inputs = build(load(spec), plan.DTYPES[request.dtype])
    tp_plan = tensor_parallel.declared_plan(model)
    if layout.tp > 1 and not tp_plan:
        raise ValueError("--tp with --model-fn needs the model to declare tp_plan = {module-name pattern: 'colwise' | "
                         "'rowwise'} (transformers' convention) naming its column- and row-parallel nn.Linear layers")
    tensor_parallel.shard_linears(model, tp_plan, layout.tp)
    tensor_parallel.add_collectives(model, tp_plan, layout.tp)
    blocks = _stage_blocks(model, layout.pp)
    boundary = []
    if blocks is not None:
        blocks[0].register_forward_hook(lambda m, a, out: boundary.append(tree_flatten(out)[0][0]))
    parameters = list(model.parameters())
    trace = Trace()
    cache_bytes = 0
    train = request.mode == "train"
    model.train(train)
    with trace:
        trace.track(parameters + [t for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor)])
        if train:
            optimizer = torch.optim.AdamW(parameters)
            for step in range(2):   # the second step runs with the optimizer state allocated, like every later one
                if step:
                    trace.begin("forward")
                    trace.peak_bytes = trace.live_bytes
                loss = _loss(model(*inputs))
                trace.begin("backward")
                loss.backward()
                trace.begin("optimizer")
                optimizer.step()
                optimizer.zero_grad()
                del loss
        else:
            with torch.no_grad():
                if request.mode == "decode":
                    cache = _decode(model, inputs)
                    trace.begin("decode")
                    model(inputs[0][:, -1:], *inputs[1:], past_key_values=cache, use_cache=True)
                    cache_bytes = sum(t.numel() * t.element_size() for t in cache_tensors(cache))
                else:
                    model(*inputs)
    phases = {"train": ("forward", "backward", "optimizer"), "prefill": ("forward",),
              "decode": ("forward", "decode")}[request.mode]
    last = {name: max(i for i, p in enumerate(trace.phases) if p.name == name) for name in phases}
    eager, compiled = {}, {}
    for name in phases:
        phase = trace.phases[last[name]]
        consumed = {key for op in phase.ops for key, _ in op.inputs}
        outputs = {key for op in phase.ops for key, _ in op.outputs if key not in consumed}
        eager[name] = cost_ops.eager_sequence(chip, phase.ops)
        compiled[name] = cost_ops.graph(chip, phase.ops, outputs) + Breakdown(collectives=sum(
            collectives.KINDS[kind](chip, nbytes, layout.tensor_group()) for kind, nbytes in phase.collectives))
    parameter_bytes = sum(p.numel() * p.element_size() for p in parameters)
    batch = next((t.shape[0] for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor) and t.dim()), 1)
    boundary_bytes = boundary[-1].numel() * boundary[-1].element_size() if boundary else 0
    pp = layout.pp
    result = {"model": {"factory": spec, "parameters": sum(p.numel() for p in parameters) * layout.tp,
                        "rank_parameters": sum(p.numel() for p in parameters), "tp_plan": tp_plan},
              "target": chip.name,
              "layout": {"nodes": layout.nodes, "tp": layout.tp, "pp": pp, "dp": layout.dp, "world": layout.world,
                         "cores_per_node": chip.cores_per_instance},
              "request": {"mode": request.mode, "dtype": request.dtype, "batch": batch}}
    across = layout.stage_boundary_crosses_instances()
    if train:
        global_batch = request.global_batch or batch * layout.dp
        if global_batch % (batch * layout.dp):
            raise plan.RequestError(f"--global-batch {global_batch} is not a multiple of the example inputs' batch x "
                                    f"dp = {batch} x {layout.dp}")
        micro = global_batch // (batch * layout.dp)
        stage = (compiled["forward"] + compiled["backward"]).scaled(1 / pp)
        if pp > 1:
            stage.collectives += 2 * collectives.send_recv(chip, boundary_bytes, across)
        step = stage.scaled(micro)
        step.pipeline_bubble = (pp - 1) * stage.total
        step += compiled["optimizer"].scaled(1 / pp)
        if layout.dp > 1:
            step.collectives += collectives.all_reduce(chip, parameter_bytes / pp, layout.data_group())
        flops = sum(op_work(chip, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs]).flops
                    for name in ("forward", "backward") for op in trace.phases[last[name]].ops)
        result.update(step_s=step.total, seq_per_s=global_batch / step.total,
                      mfu=flops * micro * layout.dp * layout.tp / step.total / (layout.world * chip.bf16_flops_per_core),
                      micro_batches_per_step=micro, breakdown=step.as_dict(),
                      eager_s=sum(e.total for e in eager.values()))
        fixed = 4 * parameter_bytes   # parameters, gradients, AdamW's two moments
        activations = max(0, trace.peak_bytes - fixed)
        memory = {"parameters": parameter_bytes // pp, "gradients": parameter_bytes // pp,
                  "optimizer_state": 2 * parameter_bytes // pp,
                  "activations": activations * min(pp, micro) // pp, "kv_cache": 0}
    else:
        for name in phases:   # one request goes through the stages one after the other
            if pp > 1:
                compiled[name].collectives += (pp - 1) * collectives.send_recv(chip, boundary_bytes, across)
        first = compiled["forward"]
        result.update(ttft_s=first.total, breakdown=first.as_dict(), eager_s=eager["forward"].total)
        if request.mode == "decode":
            result.update(tpot_s=compiled["decode"].total, breakdown=compiled["decode"].as_dict(),
                          prefill_breakdown=first.as_dict(), eager_s=eager["decode"].total)
        memory = {"parameters": parameter_bytes // pp, "gradients": 0, "optimizer_state": 0,
                  "activations": max(0, trace.peak_bytes - parameter_bytes - cache_bytes), "kv_cache": cache_bytes // pp}
    memory["total"] = sum(memory.values())
    capacity = chip.hbm_bytes_per_core
    result.update({
        "hbm_per_core_bytes": memory, "hbm_capacity_per_core_bytes": capacity, "fits": memory["total"] <= capacity,
        "ops": {"cpu_fallbacks": dict(trace.fallback_ops), "computed_in_32bit": dict(trace.computed_in_32bit)},
        "assumptions": plan.assumptions() + [
            "--model-fn: pipeline stages split the traced step evenly (the blocks of the model's largest "
            "nn.ModuleList); one stage's block output crosses each boundary"]})
    return result


def summary(e: dict) -> str:
    req = e["request"]
    seconds = e[{"train": "step_s", "prefill": "ttft_s", "decode": "tpot_s"}[req["mode"]]]
    what = {"train": "training step", "prefill": "forward", "decode": "decode step"}[req["mode"]]
    lines = [f"localneuron estimate: {e['model']['factory']} ({e['model']['parameters']:,} parameters) on {e['target']}, "
             f"{req['mode']}, {req['dtype']}, batch {req['batch']} (an estimate from the cost model, not a measurement)",
             f"  estimated device time of one {what}: eager {seconds_text(e['eager_s'])}, "
             f"as compiled graphs {seconds_text(seconds)}"]
    hbm = e["hbm_per_core_bytes"]
    lines.append(f"  HBM per NeuronCore (peak): {hbm['total'] / (1 << 20):.1f} MiB of "
                 f"{e['hbm_capacity_per_core_bytes'] / (1 << 30):.2f} GiB -> {'fits' if e['fits'] else 'DOES NOT FIT'}")
    if e["ops"]["cpu_fallbacks"]:
        lines.append("  CPU fallbacks: " + ", ".join(f"{k} x{v}" for k, v in e["ops"]["cpu_fallbacks"].items()))
    return "\n".join(lines)


def seconds_text(s: float) -> str:
    return f"{s * 1e3:.3f} ms" if s < 10 else f"{s:.2f} s"
