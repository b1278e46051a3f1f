"""Estimated NeuronCore time of a compiled graph (the cost model's fused-graph rule: one launch, only
the graph's inputs, outputs and intermediates too large for SBUF cross HBM), from the fake values
Dynamo attached to the FX nodes; and how often each compiled graph ran."""
import threading
from collections import Counter

import torch

from localneuron.compiler import partition
from localneuron.costmodel import ops as cost_ops
from localneuron.costmodel.work import DeviceWork, price_graph
from localneuron.ops.arguments import returns_view
from localneuron.runtime.config import selected_target

_lock = threading.Lock()
_per_call: dict[str, float] = {}   # graph name -> estimated seconds per call
_calls: Counter = Counter()


def _tensors(value) -> list:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [t for v in value for t in _tensors(v)]
    return []


def graph_ops(gm: torch.fx.GraphModule) -> tuple[list, set]:
    """The graph's ops as the cost model sees them, and the keys of its results."""
    ops = []
    for node in gm.graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload) or returns_view(target._schema):
            continue
        inputs = tuple((id(arg), t) for arg in node.all_input_nodes for t in _tensors(arg.meta.get("val"))[:1])
        outputs = tuple((id(node), t) for t in _tensors(node.meta.get("val"))[:1])
        eager = partition.eager_op(node)
        ops.append(cost_ops.GraphOp(target._schema.name, inputs, outputs, on_host=eager is not None and eager.fallback))
    results = {id(arg) for node in gm.graph.nodes if node.op == "output" for arg in node.all_input_nodes}
    return ops, results


def graph_work(gm: torch.fx.GraphModule, name: str) -> DeviceWork:
    ops, results = graph_ops(gm)
    return price_graph(selected_target(), name, ops, results)


def register(graph: str, run, seconds_per_call: float):
    """`run` counted per call; a call costs seconds_per_call, what its launches were priced at when compiled."""
    with _lock:
        _per_call[graph] = seconds_per_call

    def counted(args):
        with _lock:
            _calls[graph] += 1
        return run(args)

    counted._boxed_call = True
    return counted


def estimated_seconds() -> dict[str, dict]:
    with _lock:
        return {g: {"calls": _calls[g], "estimated_seconds": _calls[g] * s} for g, s in _per_call.items() if _calls[g]}

