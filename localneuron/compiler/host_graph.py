"""Turns an ATen graph over neuron tensors into the same graph over CPU tensors, for the host code generator.

The simulated NeuronCore's memory is host memory, so the generated CPU code can run on zero-copy CPU
aliases of the device tensors (launch.py). Only the graph's own device constants (torch.ones(...,
device=x.device), _to_copy(..., device=...)) name the device and need rewriting.
"""
import torch
from torch._guards import detect_fake_mode
from torch.fx.node import map_aggregate

CPU = torch.device("cpu")


def _host_device(value):
    if isinstance(value, torch.device) and value.type == "neuron":
        return CPU
    return value


def rewrite_devices(gm: torch.fx.GraphModule) -> torch.fx.GraphModule:
    for node in gm.graph.nodes:
        node.args = map_aggregate(node.args, _host_device)
        node.kwargs = map_aggregate(node.kwargs, _host_device)
    gm.recompile()
    return gm


def host_inputs(example_inputs) -> list:
    """CPU fake tensors with the sizes and strides of the neuron example inputs, under the same fake mode."""
    fake_mode = detect_fake_mode(example_inputs)
    with fake_mode:
        return [torch.empty_strided(t.size(), t.stride(), dtype=t.dtype, device=CPU)
                if isinstance(t, torch.Tensor) else t for t in example_inputs]


def output_on_device(gm: torch.fx.GraphModule) -> tuple[bool, ...]:
    """Which graph outputs are neuron tensors (the rest, CPU tensors and scalars, are returned as they are)."""
    (outputs,) = [n.args[0] for n in gm.graph.nodes if n.op == "output"]
    return tuple(isinstance(o, torch.fx.Node) and isinstance(o.meta.get("val"), torch.Tensor)
                 and o.meta["val"].device.type == "neuron" for o in outputs)
