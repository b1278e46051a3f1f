"""Long compiles show progress on a terminal (graph, elapsed, graphs compiled) and nothing otherwise."""
import os
import pty
import subprocess
import sys
import textwrap

CODE = textwrap.dedent("""
    import torch
    import localneuron.compiler.progress as progress
    progress.SHOW_AFTER_S = 0.0  # every compile counts as long here
    g = torch.compile(lambda x: (x * 2).relu(), backend="neuron")
    g(torch.ones(8, device="neuron"))
    print("done")
""")


def run(stderr_tty: bool) -> str:
    env = {**os.environ, "TORCH_NEURONX_DISABLE_NEFF_CACHE": "1"}
    if not stderr_tty:
        r = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        return r.stderr
    leader, follower = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-c", CODE], stdout=subprocess.PIPE, stderr=follower, env=env)
        os.close(follower)
        chunks = []
        while True:
            try:
                data = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout=300) == 0
        return b"".join(chunks).decode(errors="replace")
    finally:
        os.close(leader)


def test_progress_on_a_terminal():
    out = run(stderr_tty=True)
    assert "[Neuron] compiling model_default_0_" in out and "this one pending" in out
    assert "[Neuron] compiled model_default_0_" in out and "graphs compiled)" in out


def test_quiet_when_not_a_terminal():
    assert "[Neuron] compil" not in run(stderr_tty=False)
