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

from dataclasses import replace

from localneuron.costmodel.engines import op_work
from localneuron.costmodel.hardware import Chip
from localneuron.estimate import plan, tensor_parallel
from localneuron.estimate.hf import cache_tensors
from localneuron.estimate.layout import Layout
from localneuron.estimate.trace import Trace, cast
from localneuron.estimate.traced import EMPTY, Graphs, TracedModule


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


def _traced(chip: Chip, trace: Trace, phases: dict, parameters: list, collected: dict, saved_bytes: int) -> TracedModule:
    """The module as the trace saw it: `phases` names the trace phases that are its forward and backward."""
    def graph(name):
        if name is None:
            return [], set()
        phase = trace.phases[max(i for i, p in enumerate(trace.phases) if p.name == name)]
        consumed, produced, updated = set(), set(), set()
        for op in phase.ops:   # results nothing consumes, and graph inputs updated in place, reach HBM
            consumed.update(key for key, _ in op.inputs)
            updated.update(key for key, _ in op.outputs if key in consumed and key not in produced)
            produced.update(key for key, _ in op.outputs)
        return phase.ops, {key for key in produced if key not in consumed} | updated
    forward, forward_outputs = graph(phases["forward"])
    backward, backward_outputs = graph(phases.get("backward"))
    flops = sum(op_work(chip, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs]).flops for op in forward)
    return TracedModule(chip, Graphs(forward, forward_outputs, backward, backward_outputs), collected,
                        sum(p.numel() for p in parameters), sum(p.numel() * p.element_size() for p in parameters),
                        saved_bytes, 0, trace.fallback_ops, trace.computed_in_32bit, flops)


def _phase_collectives(trace: Trace, names: dict) -> dict:
    return {role: trace.collectives_of_last(name) for role, name in names.items() if name}


def estimate(spec: str, layout: Layout, request: plan.Request) -> tuple[dict, dict]:
    """(what the model is, the schedule's result): the factory's model traced whole, as one compiled
    graph per phase; pipeline stages split it evenly (each a 1/pp share of the traced step)."""
    chip, pp = layout.chip, layout.pp
    model, inputs = build(load(spec), plan.DTYPES[request.dtype])
    tp_plan = tensor_parallel.declared_plan(model)
    if layout.tp > 1 and not tp_plan:
        raise ValueError("--tp with --model-fn needs the model to declare tp_plan = {module-name pattern: 'colwise' | "
                         "'rowwise'} (transformers' convention) naming its column- and row-parallel nn.Linear layers")
    tensor_parallel.shard_linears(model, tp_plan, layout.tp)
    tensor_parallel.add_collectives(model, tp_plan, layout.tp)
    blocks = _stage_blocks(model, pp)
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
                    trace.release_dead()
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
    parameter_bytes = sum(p.numel() * p.element_size() for p in parameters)
    batch = next((t.shape[0] for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor) and t.dim()), 1)
    boundary_bytes = boundary[-1].numel() * boundary[-1].element_size() if boundary else 0
    if train:
        request = replace(request, micro_batch=batch)
        phases = {"forward": "forward", "backward": "backward"}
        fixed = 4 * parameter_bytes   # parameters, gradients, AdamW's two moments
        whole = _traced(chip, trace, phases, parameters, _phase_collectives(trace, phases),
                        max(0, trace.peak_bytes - fixed))
        step = _traced(chip, trace, {"forward": "optimizer"}, [], {}, 0)
        stack = plan.Stack([(whole.scaled(1 / pp), pp)], EMPTY, EMPTY, boundary_bytes, whole.flops * layout.tp,
                           optimizer=step.scaled(1 / pp))
        result = plan.schedule_train(stack, layout, request)
    else:
        request = replace(request, batch=batch)
        activations = max(0, trace.peak_bytes - parameter_bytes - cache_bytes)
        prefill = _traced(chip, trace, {"forward": "forward"}, parameters,
                          _phase_collectives(trace, {"forward": "forward"}), 0)
        prefill.workspace_bytes = activations
        stacks = [plan.Stack([(prefill.scaled(1 / pp), pp)], EMPTY, EMPTY, boundary_bytes, prefill.flops * layout.tp)]
        if request.mode == "decode":
            step = _traced(chip, trace, {"forward": "decode"}, parameters,
                           _phase_collectives(trace, {"forward": "decode"}), 0)
            stacks.append(plan.Stack([(step.scaled(1 / pp), pp)], EMPTY, EMPTY, boundary_bytes, step.flops * layout.tp))
        result = plan.schedule_inference(stacks[0], stacks[1] if len(stacks) > 1 else None, layout, request,
                                         cache_bytes // pp)
    model_info = {"model_type": "factory", "factory": spec, "built_with": f"the factory {spec} (traced whole)",
                  "parameters": sum(p.numel() for p in parameters) * layout.tp,
                  "rank_parameters": sum(p.numel() for p in parameters), "tp_plan": tp_plan, "batch": batch}
    return model_info, result
