"""The `localneuron` command: run a script with the portability report, and info."""
import json
import subprocess
import sys
import textwrap


def localneuron(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "localneuron.cli.main", *args], capture_output=True, text=True,
                          timeout=300, cwd=cwd)


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
    assert "localneuron portability report (simulated trn2, 4 NeuronCores visible)" in r.stdout
    assert "aten::mm" in r.stdout and "CPU FALLBACKS" in r.stdout and "aten::linalg_qr" in r.stdout
    assert "64-bit tensors computed in 32-bit" in r.stdout
    assert "Peak device memory on neuron:0" in r.stdout and "Executable cache:" in r.stdout
    assert "Estimated NeuronCore time of the eager ops (roofline estimate, not a measurement)" in r.stdout
    data = json.loads(out.read_text())
    assert data["native_ops"]["aten::mm"] == 3
    assert data["cpu_fallback_ops"] == {"aten::linalg_qr": 1}
    assert data["native_ops_computed_in_32bit"]["aten::mul"] == 1
    assert data["memory"][0]["peak_allocated_bytes"] >= 2 * 2**20
    assert data["memory"][0]["capacity_bytes"] == 24 * 2**30
    assert data["executable_cache"]["hits"] >= 4 and data["executable_cache"]["misses"] >= 3
    assert data["estimated_device_seconds_by_op"]["aten::mm"] > 0


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
    assert "HBM per NeuronCore: 24.0 GiB" in r.stdout and "compile cache:" in r.stdout
