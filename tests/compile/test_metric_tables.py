"""The graph_stats metric table, as TorchNeuron writes it: TORCH_NEURONX_ENABLED_METRIC_TABLES asks for it, and at exit
it is written as CSV into TORCH_NEURONX_METRICS_DIR, one row per compiled graph (the rows: test_compile_metrics.py).
Each case is a fresh interpreter, since the table is written when the interpreter exits."""
import csv
import json
import os

from fresh_python import run_python

COLUMNS = ["graph_id", "graph_name", "model_name", "has_collectives", "graph_node_count", "timestamp",
           "torch_neuronx_fx_passes_us", "torch_neuronx_lower_us", "torch_neuronx_compile_us"]

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
