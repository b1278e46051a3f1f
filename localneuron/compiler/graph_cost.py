"""Estimated NeuronCore time of one compiled graph: the cost model's time of each ATen op in it, but one
executable launch for the whole graph (the graph is one executable, not one per op)."""
import torch

from localneuron.runtime import cost_model
from localneuron.runtime.config import selected_target


def estimated_seconds(gm: torch.fx.GraphModule) -> float:
    target = selected_target()
    total = target.launch_overhead_s
    for node in gm.graph.nodes:
        if node.op != "call_function" or not isinstance(node.target, torch._ops.OpOverload):
            continue
        args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta.get("val"))
        total += cost_model.estimate_seconds(target, node.target._schema.name, args, kwargs,
                                             on_host=False) - target.launch_overhead_s
    return total
