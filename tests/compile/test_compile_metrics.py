"""torch.compile's per-graph metrics under TorchNeuron's names: get_dynamo_metrics() rows carry its graph_stats
fields, and Dynamo's counters["neuron"] and compilation_time_metrics count the graphs (the graph_stats table these
rows are written to at exit: test_metric_tables.py)."""
import re

import torch
import torch_neuronx
from torch._dynamo.utils import compilation_time_metrics, counters

from localneuron.compiler import metrics


def test_each_graph_carries_torchneurons_fields_and_dynamos_counters_count_it():
    torch_neuronx.reset_dynamo_metrics()
    model = torch.nn.Sequential(torch.nn.Linear(5, 3), torch.nn.ReLU()).to("neuron")
    compiled = torch.compile(model, backend="neuron", options={"model_name": "tiny_mlp"})
    compiled(torch.randn(2, 5, device="neuron")).sum().backward()
    forward, backward = torch_neuronx.get_dynamo_metrics()
    for graph, kind in ((forward, "forward"), (backward, "backward")):
        assert re.fullmatch(rf"tiny_mlp_\d+_{kind}_\d+", graph.graph_name), graph.graph_name
        assert re.fullmatch(r"[0-9a-f]{64}", graph.graph_id)  # the persistent cache's key of its code
        assert graph.model_name == "tiny_mlp" and graph.has_collectives is False
        assert graph.graph_node_count > graph.node_count > 0  # every FX node, placeholders and output included
        assert graph.torch_neuronx_lower_us == 0 and graph.torch_neuronx_fx_passes_us >= 0
        assert graph.torch_neuronx_compile_us > 0
    assert forward.graph_id != backward.graph_id and forward.timestamp <= backward.timestamp
    assert re.fullmatch(r"\d{8}_\d{6}_\d{6}", forward.timestamp)
    assert counters["neuron"]["compiled_graphs"] == 2 and "graphs_with_collectives" not in counters["neuron"]
    assert compilation_time_metrics["torch_neuronx_compile"] == [g.torch_neuronx_compile_us / 1e6
                                                                 for g in (forward, backward)]
    torch_neuronx.reset_dynamo_metrics()
    assert not counters["neuron"] and "torch_neuronx_compile" not in compilation_time_metrics
    assert torch_neuronx.get_dynamo_metrics() == []


def test_a_graph_calling_functional_collectives_has_collectives():
    def reduce_then_scale(x):
        return torch.ops._c10d_functional.all_reduce.default(x, "sum", "0") * 2

    def scale(x):
        return x * 2

    assert metrics.has_collectives(torch.fx.symbolic_trace(reduce_then_scale))
    assert not metrics.has_collectives(torch.fx.symbolic_trace(scale))
