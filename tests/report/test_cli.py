"""The `localneuron` command: run a script with the portability report, and info."""
import json
import signal
import subprocess
import sys
import textwrap

import pytest

from cli_runner import localneuron
from fresh_python import interruptible




def test_run_prints_the_portability_report_and_writes_json(tmp_path):
    script = tmp_path / "job.py"
    script.write_text(textwrap.dedent("""
        import sys
        import torch
        x = torch.ones(4, 4).to("neuron")
        for _ in range(3):
            y = (x @ x).relu()
        q, r = torch.linalg.qr(x + torch.eye(4, device="neuron"))
        z = torch.ones(3, dtype=torch.float64, device="neuron") * 2
        big = torch.empty(2 * 2**20, dtype=torch.uint8, device="neuron")
        print("args", sys.argv[1:])
    """))
    out = tmp_path / "report.json"
    r = localneuron("run", "--json", str(out), str(script), "--flag", "7")
    assert r.returncode == 0, r.stderr
    assert "args ['--flag', '7']" in r.stdout
    assert "localneuron portability report (simulated trn2 at LNC=2, 4 NeuronCores visible)" in r.stdout
    assert "aten::mm" in r.stdout and "CPU FALLBACKS" in r.stdout and "aten::linalg_qr" in r.stdout
    assert "64-bit tensors computed in 32-bit" in r.stdout
    assert "Peak device memory on neuron:0" in r.stdout and "Executable cache:" in r.stdout
    assert "Estimated device time (cost model, not a measurement): eager " in r.stdout
    assert ", as compiled graphs " in r.stdout
    data = json.loads(out.read_text())
    assert data["native_ops"]["aten::mm"] == 3
    assert data["cpu_fallback_ops"] == {"aten::linalg_qr": 1}
    assert data["native_ops_computed_in_32bit"]["aten::mul.Tensor"] == 1
    assert data["memory"][0]["peak_allocated_bytes"] >= 2 * 2**20
    assert data["memory"][0]["capacity_bytes"] == 24 * 2**30
    assert data["executable_cache"]["hits"] >= 4 and data["executable_cache"]["misses"] >= 3
    assert data["estimated_device_seconds_by_op"]["aten::mm"] > 0
    device = data["estimated_device_seconds"]
    assert 0 < device["as_compiled_graphs"] < device["total"]  # compiling saves launches and HBM round trips


def test_run_passes_the_script_exit_status_and_still_reports(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("import torch\ntorch.ones(2, device='neuron').sum()\nraise SystemExit(3)\n")
    r = localneuron("run", str(script))
    assert r.returncode == 3
    assert "portability report" in r.stdout and "aten::sum" in r.stdout


def test_run_reports_a_missing_script_clearly():
    r = localneuron("run", "no/such/script.py")
    assert r.returncode == 2 and "no such script" in r.stderr


def test_info():
    r = localneuron("info")
    assert r.returncode == 0, r.stderr
    assert "simulated target: trn2" in r.stdout and "visible NeuronCores: 4" in r.stdout
    assert "device times priced as the torchneuron stack" in r.stdout
    assert "HBM per NeuronCore: 24.00 GiB" in r.stdout and "compile cache:" in r.stdout


def test_sys_exit_with_a_message_prints_it_and_exits_1_like_python(tmp_path):
    script = tmp_path / "bail.py"
    script.write_text("import sys\nsys.exit('cannot continue: no data')\n")
    r = localneuron("run", str(script))
    assert r.returncode == 1
    assert "cannot continue: no data" in r.stderr
    assert "portability report" in r.stdout


def test_a_forked_child_does_not_print_a_second_report(tmp_path):
    script = tmp_path / "forks.py"
    script.write_text(textwrap.dedent("""
        import os, sys
        import torch
        torch.ones(2, device="neuron").sum()
        pid = os.fork()
        if pid == 0:
            print("child done", flush=True)
            sys.exit(0)
        os.waitpid(pid, 0)
        print("parent done", flush=True)
    """))
    out = tmp_path / "r.json"
    r = localneuron("run", "--json", str(out), str(script))
    assert r.returncode == 0, r.stderr
    assert "child done" in r.stdout and "parent done" in r.stdout
    assert r.stdout.count("localneuron portability report") == 1
    assert json.loads(out.read_text())["native_ops"]["aten::sum.dim_IntList"] == 1  # sum() on the device


@pytest.mark.parametrize("problem", ["missing directory", "is a directory", "parent is a file"])
def test_json_path_problems_are_reported_before_the_script_runs(tmp_path, problem):
    marker = tmp_path / "ran"
    script = tmp_path / "job.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    (tmp_path / "plain_file").write_text("")
    target = {"missing directory": tmp_path / "no" / "such" / "r.json",
              "is a directory": tmp_path,
              "parent is a file": tmp_path / "plain_file" / "r.json"}[problem]
    r = localneuron("run", "--json", str(target), str(script))
    assert r.returncode == 2
    assert f"cannot write --json {target}" in r.stderr
    assert not marker.exists()


def test_a_failed_json_write_leaves_no_file_behind(tmp_path):
    # The script caps this process's file size, so writing the report fails halfway (like a full disk).
    script = tmp_path / "caps.py"
    script.write_text(textwrap.dedent("""
        import resource, signal
        import torch
        torch.ones(2, device="neuron").sum()
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
    """))
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    r = localneuron("run", "--json", str(out_dir / "r.json"), str(script))
    assert r.returncode == 1
    assert "could not write --json" in r.stderr and "portability report" in r.stdout
    assert list(out_dir.iterdir()) == []


def test_ctrl_c_prints_the_partial_report_and_exits_130(tmp_path):
    script = tmp_path / "long.py"
    script.write_text(textwrap.dedent("""
        import time
        import torch
        x = torch.ones(4, device="neuron")
        (x @ x).sum()
        print("ready", flush=True)
        time.sleep(120)
    """))
    process = interruptible([sys.executable, "-m", "localneuron.cli.main", "run", str(script)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout.readline().strip() == "ready"
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 130
    assert "KeyboardInterrupt" in stderr
    assert "localneuron portability report" in stdout and "aten::dot" in stdout
