"""The portability report of `localneuron run`: fallbacks, 64-bit downcasts, recompiles, graph breaks and blocking host
syncs attributed to the user's source lines; --strict; -m; one merged report under torchrun."""
import json
import os
import subprocess
import sys

from cli_runner import lines_of, localneuron, write
from distributed_launcher import finish, free_port


JOB = """
    import torch
    x = torch.ones(8, 8, device="neuron")

    def solve(t):
        return torch.linalg.inv(t + torch.eye(8, device="neuron"))  # FALLBACK

    for step in range(4):
        y = solve(x)                                                 # CALLER
        total = y.sum().item()                                       # ITEM
        if (y > 100).any():                                          # BOOL
            print("large")
        host = y.cpu()                                               # CPU
    z = torch.ones(3, dtype=torch.float64, device="neuron") * 2      # FLOAT64
"""


def test_every_event_is_attributed_to_the_user_line_with_counts(tmp_path):
    script = write(tmp_path / "job.py", JOB)
    line = lines_of(script, "# FALLBACK", "# CALLER", "# ITEM", "# BOOL", "# CPU", "# FLOAT64")
    out = tmp_path / "report.json"
    r = localneuron("run", "--json", str(out), str(script))
    assert r.returncode == 0, r.stderr
    sources = json.loads(out.read_text())["sources"]
    site = lambda name: f"{script}:{line[name]}"  # noqa: E731

    fallback = sources["cpu_fallback"]["aten::linalg_inv_ex"]
    assert fallback == {f"{site('# FALLBACK')} in solve <- {site('# CALLER')} in <module>": 4}
    syncs = sources["host_sync"]
    scalar_reads = syncs["scalar read (.item(), bool(), int(), float(), `if tensor:`)"]
    assert scalar_reads[f"{site('# ITEM')} in <module>"] == 4
    assert scalar_reads[f"{site('# BOOL')} in <module>"] == 4
    assert syncs["copy to host (.cpu(), .numpy(), .tolist())"] == {f"{site('# CPU')} in <module>": 4}
    assert sources["64bit_downcast"]["aten::mul.Tensor"] == {f"{site('# FLOAT64')} in <module>": 1}
    assert "Blocking host syncs by call site" in r.stdout and f"4 x {site('# CPU')} in <module>" in r.stdout


def test_runtime_copies_of_a_fallback_are_not_counted_as_user_syncs(tmp_path):
    script = write(tmp_path / "job.py", """
        import torch
        x = torch.ones(8, 8, device="neuron")
        for _ in range(3):
            torch.linalg.qr(x)
    """)
    out = tmp_path / "report.json"
    assert localneuron("run", "--json", str(out), str(script)).returncode == 0
    data = json.loads(out.read_text())
    assert data["cpu_fallback_ops"] == {"aten::linalg_qr": 3}
    assert data["sources"]["host_sync"] == {}


def test_recompiles_and_graph_breaks_name_the_call_site(tmp_path):
    script = write(tmp_path / "job.py", """
        import torch

        def f(x):
            y = x * 2
            print("break")                                   # BREAK
            return y + 1

        g = torch.compile(f, backend="neuron")
        for n in (4, 5, 6):
            g(torch.ones(n, device="neuron"))                # CALL
    """)
    line = lines_of(script, "# CALL", "# BREAK")
    out = tmp_path / "report.json"
    r = localneuron("run", "--json", str(out), str(script))
    assert r.returncode == 0, r.stderr
    sources = json.loads(out.read_text())["sources"]
    recompiles = sources["recompile"]
    assert sum(sum(s.values()) for s in recompiles.values()) >= 2
    assert all(site.startswith(f"{script}:") for sites in recompiles.values() for site in sites)
    breaks = sources["graph_break"]
    assert any(f"{script}:{line['# BREAK']} in f" in sites for sites in breaks.values()), breaks


def test_strict_fails_on_fallbacks_and_on_recompiles_beyond_the_threshold(tmp_path):
    clean = write(tmp_path / "clean.py", """
        import torch
        x = torch.ones(4, device="neuron")
        print((x * 2).sum().item())
    """)
    assert localneuron("run", "--strict", str(clean)).returncode == 0
    fallback = write(tmp_path / "fallback.py", """
        import torch
        torch.linalg.qr(torch.ones(4, 4, device="neuron"))
    """)
    r = localneuron("run", "--strict", str(fallback))
    assert r.returncode == 3 and "aten::linalg_qr" in r.stderr
    assert localneuron("run", str(fallback)).returncode == 0  # without --strict only the report says so
    recompiling = write(tmp_path / "recompile.py", """
        import torch
        g = torch.compile(lambda x: x * 2, backend="neuron")
        for n in (4, 5, 6):
            g(torch.ones(n, device="neuron"))
    """)
    r = localneuron("run", "--strict", str(recompiling))
    assert r.returncode == 3 and "recompiles" in r.stderr
    assert localneuron("run", "--strict", "--max-recompiles", "5", str(recompiling)).returncode == 0
    failing = write(tmp_path / "failing.py", "import torch\ntorch.linalg.qr(torch.ones(2, 2, device='neuron'))\n"
                    "raise SystemExit(7)\n")
    assert localneuron("run", "--strict", str(failing)).returncode == 7  # the script's own failure wins


def test_run_module_like_python_dash_m(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write(package / "job.py", """
        import sys
        import torch
        print("module args", sys.argv[1:], __name__)
        print((torch.ones(2, device="neuron") + 1).sum().item())
    """)
    r = localneuron("run", "-m", "pkg.job", "--lr", "3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "module args ['--lr', '3'] __main__" in r.stdout
    assert "localneuron portability report" in r.stdout
    assert localneuron("run").returncode == 2  # neither a script nor -m


def test_torchrun_every_rank_writes_a_report_and_rank0_prints_one_merged(tmp_path):
    script = write(tmp_path / "job.py", """
        import os
        import torch
        rank = int(os.environ["RANK"])
        x = torch.ones(4, 4, device="neuron")
        for _ in range(3):
            (x @ x).sum().item()
        if rank == 1:
            torch.linalg.qr(x)
    """)
    reports = tmp_path / "reports"
    proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                             "--master_port", str(free_port()), "-m", "localneuron.cli.main", "run", str(script)],
                            env={**os.environ, "LOCALNEURON_REPORT_DIR": str(reports), "TMPDIR": str(tmp_path)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    log = finish([proc], timeout=200)[0]
    assert proc.returncode == 0, log[-3000:]
    assert log.count("localneuron portability report") == 1  # rank 0 prints, once
    assert "Merged report of ranks [0, 1]" in log
    assert "cpu_fallback_ops aten::linalg_qr: rank 0: 0, rank 1: 1" in log
    assert log.count("    aten::mm ") == 1  # listed once, not once per rank
    files = sorted(p.name for p in reports.iterdir())
    assert len(files) == 2 and all("-rank" in f for f in files)
    for f in files:
        data = json.loads((reports / f).read_text())
        assert data["native_ops"]["aten::mm"] == 3  # each rank's full report


def test_a_copy_to_host_on_the_autograd_thread_is_counted_without_a_python_caller():
    import torch

    from localneuron.runtime import call_sites, host_syncs

    call_sites.clear()
    w = torch.ones(3, requires_grad=True)
    w.to("neuron").sum().backward()  # the gradient goes back to the CPU parameter on the engine's thread
    copies = call_sites.snapshot()["host_sync"][host_syncs.KINDS[1]]
    assert copies == {host_syncs.NO_PYTHON_CALLER: 1}
    torch.testing.assert_close(w.grad, torch.ones(3))
