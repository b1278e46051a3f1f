"""The `neuron` backend under the real torchrun: a two-node job joined by a c10d rendezvous on loopback,
checked against the single-node CPU + Gloo run of the same script, with each rank's report file."""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from distributed_launcher import finish, free_port

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "distributed" / "ddp_train.py"
# Two ranks share one stdout and print() writes the newline separately, so two lines can run together.
LOSS = re.compile(r"rank (\d+) step (\d+) loss (\d+\.\d{6}) device ((?:neuron|cpu)(?::\d+)?)")


def torchrun(*args: str, scratch: Path, script_args: tuple = (), env: dict | None = None) -> subprocess.Popen:
    # TMPDIR: torchrun keeps a log directory per run in the temporary directory and never removes it
    return subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *args, str(EXAMPLE), *script_args],
                            env={**os.environ, "TMPDIR": str(scratch), **(env or {})}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def losses(log: str) -> dict:
    return {(int(r), int(s)): (float(loss), device) for r, s, loss, device in LOSS.findall(log)}


def test_two_nodes_on_loopback_match_cpu_gloo_and_write_rank_reports(tmp_path):
    port = free_port()
    nodes = [torchrun("--nnodes", "2", "--node_rank", str(node), "--nproc_per_node", "1", "--rdzv_backend", "c10d",
                      "--rdzv_endpoint", f"127.0.0.1:{port}", "--rdzv_id", "loopback", scratch=tmp_path,
                      env={"LOCALNEURON_REPORT_DIR": str(tmp_path)}) for node in (0, 1)]
    reference = torchrun("--standalone", "--nproc_per_node", "2", scratch=tmp_path,
                         script_args=("--device", "cpu", "--backend", "gloo"))
    logs = finish(nodes + [reference], timeout=150)
    for proc, log in zip(nodes + [reference], logs):
        assert proc.returncode == 0, log[-3000:]

    got = {**losses(logs[0]), **losses(logs[1])}
    want = losses(logs[2])
    assert got.keys() == want.keys() and {r for r, _ in got} == {0, 1}
    for key, (loss, device) in got.items():
        assert device == "neuron:0"  # LOCAL_RANK is 0 on both nodes
        assert abs(loss - want[key][0]) < 1e-5, (key, loss, want[key])

    for rank in (0, 1):
        report = json.loads((tmp_path / f"localneuron-report-rank{rank}.json").read_text())
        assert report["rank"] == rank and report["world_size"] == 2
        all_reduce = report["distributed"]["collectives"]["all_reduce"]
        assert all_reduce["calls"] >= 5 and all_reduce["bytes"] > 0  # DDP: at least one bucket per step
