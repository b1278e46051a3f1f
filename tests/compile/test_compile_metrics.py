"""torch.compile's per-graph metrics under TorchNeuron's names: get_dynamo_metrics() rows carry its graph_stats
fields, Dynamo's counters["neuron"] and compilation_time_metrics count the graphs, and TORCH_NEURONX_ENABLED_METRIC_TABLES
writes the graph_stats table as CSV at exit into TORCH_NEURONX_METRICS_DIR."""
import csv
import json
import os
import re

import pytest
import torch
import torch_neuronx
from torch._dynamo.utils import compilation_time_metrics, counters

from fresh_python import run_python
from localneuron.compiler import metrics

COLUMNS = ["graph_id", "graph_name", "model_name", "has_collectives", "graph_node_count", "timestamp",
           "torch_neuronx_fx_passes_us", "torch_neuronx_lower_us", "torch_neuronx_compile_us"]


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


CHILD = """
import json, torch, torch_neuronx
model = torch.nn.Linear(4, 2).to("neuron")
torch.compile(model, backend="neuron")(torch.randn(3, 4, device="neuron")).sum().backward()
print(json.dumps([[g.graph_name, g.graph_id, g.graph_node_count] for g in torch_neuronx.get_dynamo_metrics()]))
"""


def test_graph_stats_table_is_written_at_exit_one_row_per_graph(tmp_path):
    done = run_python(CHILD, env={"TORCH_NEURONX_ENABLED_METRIC_TABLES": " graph_stats ",
                                  "TORCH_NEURONX_METRICS_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    graphs = json.loads(done.stdout.strip().splitlines()[-1])
    with open(tmp_path / "metric_table_graph_stats_rank0.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows[0] == COLUMNS
    assert [[row[1], row[0], int(row[4])] for row in rows[1:]] == graphs and len(graphs) == 2
    assert all(row[2] == "model_default" and row[3] == "False" for row in rows[1:])


def test_no_table_is_written_unless_asked(tmp_path):
    done = run_python(CHILD, env={"TORCH_NEURONX_METRICS_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []


def test_an_unknown_table_is_refused_with_the_tables_there_are(tmp_path):
    done = run_python(CHILD, env={"TORCH_NEURONX_ENABLED_METRIC_TABLES": "graph_stats,op_stats",
                                  "TORCH_NEURONX_METRICS_DIR": str(tmp_path)})
    assert done.returncode != 0
    assert "TORCH_NEURONX_ENABLED_METRIC_TABLES names 'op_stats', which is not a metric table" in done.stderr
    assert "the tables are: graph_stats" in done.stderr


def test_a_directory_that_cannot_be_written_costs_a_warning_not_the_exit_status(tmp_path):
    target = tmp_path / "not_a_dir"
    target.write_text("a file where the directory should be")
    done = run_python(CHILD, env={"TORCH_NEURONX_ENABLED_METRIC_TABLES": "graph_stats",
                                  "TORCH_NEURONX_METRICS_DIR": str(target)})
    assert done.returncode == 0, done.stderr
    assert "the graph_stats metric table was not written" in done.stderr


def test_a_link_planted_at_the_tables_name_is_replaced_never_followed(tmp_path):
    """TORCH_NEURONX_METRICS_DIR defaults to the shared /tmp: another user can plant the file name first."""
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours to overwrite")
    (tmp_path / "metric_table_graph_stats_rank0.csv").symlink_to(victim)
    done = run_python(CHILD, env={"TORCH_NEURONX_ENABLED_METRIC_TABLES": "graph_stats",
                                  "TORCH_NEURONX_METRICS_DIR": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    assert victim.read_text() == "not yours to overwrite"
    table = tmp_path / "metric_table_graph_stats_rank0.csv"
    assert not table.is_symlink() and table.read_text().splitlines()[0] == ",".join(COLUMNS)


def test_a_fifo_planted_at_the_tables_name_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "metric_table_graph_stats_rank0.csv")
    done = run_python(CHILD, env={"TORCH_NEURONX_ENABLED_METRIC_TABLES": "graph_stats",
                                  "TORCH_NEURONX_METRICS_DIR": str(tmp_path)}, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "the graph_stats metric table was not written" in done.stderr and "FIFO" in done.stderr
