"""`--model-fn module:function`: any PyTorch model, estimated whole on one NeuronCore per replica.

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
from localneuron.estimate import plan
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
    if layout.tp != 1 or layout.pp != 1:
        raise ValueError("--model-fn estimates one whole replica per NeuronCore (data parallel only); "
                         "tensor and pipeline parallelism need --hf-config")
    if request.mode == "decode":
        raise ValueError("--mode decode needs a KV cache the estimate builds from --hf-config; use --mode prefill "
                         "for one forward of a --model-fn model")
    with fake_device():
        return _estimate(spec, chip, layout, request)


def _estimate(spec: str, chip: Chip, layout: Layout, request: plan.Request) -> dict:
    model, inputs = build(load(spec), plan.DTYPES[request.dtype])
    parameters = list(model.parameters())
    trace = Trace()
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
                model(*inputs)
    phases = ("forward", "backward", "optimizer") if train else ("forward",)
    last = {name: max(i for i, p in enumerate(trace.phases) if p.name == name) for name in phases}
    eager, compiled = Breakdown(), Breakdown()
    for name in phases:
        ops = trace.phases[last[name]].ops
        consumed = {key for op in ops for key, _ in op.inputs}
        outputs = {key for op in ops for key, _ in op.outputs if key not in consumed}
        eager += cost_ops.eager_sequence(chip, ops)
        compiled += cost_ops.graph(chip, ops, outputs)
    parameter_bytes = sum(p.numel() * p.element_size() for p in parameters)
    if train and layout.dp > 1:
        compiled.collectives += collectives.all_reduce(chip, parameter_bytes, layout.data_group())
    flops = sum(op_work(chip, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs]).flops
                for name in phases for op in trace.phases[last[name]].ops)
    step_s = compiled.total
    batch = next((t.shape[0] for t in tree_flatten(inputs)[0] if isinstance(t, torch.Tensor) and t.dim()), 1)
    capacity = chip.hbm_bytes_per_core
    result = {
        "model": {"factory": spec, "parameters": sum(p.numel() for p in parameters)},
        "target": chip.name,
        "layout": {"nodes": layout.nodes, "tp": 1, "pp": 1, "dp": layout.dp, "world": layout.world,
                   "cores_per_node": chip.cores_per_instance},
        "request": {"mode": request.mode, "dtype": request.dtype, "batch": batch},
        "breakdown": compiled.as_dict(),
        "eager_s": eager.total,
        "hbm_per_core_bytes": {"parameters": parameter_bytes,
                               "gradients": parameter_bytes if train else 0,
                               "optimizer_state": 2 * parameter_bytes if train else 0,
                               "activations": max(0, trace.peak_bytes - (4 if train else 1) * parameter_bytes),
                               "kv_cache": 0, "total": trace.peak_bytes},
        "hbm_capacity_per_core_bytes": capacity,
        "fits": trace.peak_bytes <= capacity,
        "ops": {"cpu_fallbacks": dict(trace.fallback_ops), "computed_in_32bit": dict(trace.computed_in_32bit)},
        "assumptions": plan.assumptions(),
    }
    if train:
        result.update(step_s=step_s, seq_per_s=batch * layout.dp / step_s,
                      mfu=flops / step_s / chip.bf16_flops_per_core)
    else:
        result["ttft_s"] = step_s
    return result


def summary(e: dict) -> str:
    req = e["request"]
    seconds = e["step_s"] if req["mode"] == "train" else e["ttft_s"]
    what = "training step" if req["mode"] == "train" else "forward"
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
