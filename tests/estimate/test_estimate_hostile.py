"""`localneuron estimate` attacked: scripts that write checkpoints, guard their loss, start threads, exit
abruptly or are killed, configs and flags that are hostile. Each test is the attack or the user's
workflow that used to lose data, fail, hang or trace back; every bad input ends in one line and exit
status 2."""
import functools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

import cli_runner
from localneuron.estimate.script import launcher_environment

ROOT = Path(__file__).resolve().parents[2]
localneuron = functools.partial(cli_runner.localneuron, cwd=ROOT, timeout=300)


def training_script(path: Path, each_step: str = "", before: str = "", after: str = "") -> Path:
    """A small training script on the neuron device running 3 optimizer steps: `before` runs once the
    model and optimizer exist, `each_step` after each step's loss (as `loss`), `after` at the end."""
    indent = lambda code: "\n".join("    " + line for line in code.strip().splitlines())  # noqa: E731
    path.write_text(f"""\
import json, math, os, sys, threading, time
import torch

model = torch.nn.Linear(16, 16).to("neuron")
optimizer = torch.optim.AdamW(model.parameters())
{before.strip()}
for step in range(3):
    loss = model(torch.randn(4, 16, device="neuron")).pow(2).mean()
{indent(each_step) if each_step.strip() else ""}
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
{after.strip()}
""")
    return path


def single_line_refusal(r) -> str:
    """The one line a refused request prints (and exit status 2, no traceback)."""
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("localneuron estimate: "), r.stderr
    assert "Traceback" not in r.stderr
    return lines[0]


# --- the launcher's environment and the job's size ----------------------------------------------------
def test_a_script_sees_the_environment_torchrun_gives_its_rank(tmp_path):
    names = ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "NODE_RANK", "ROLE_RANK",
             "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"]
    script = training_script(tmp_path / "train.py", before=f"print('ENV', json.dumps({{n: os.environ.get(n) for n in "
                                                             f"{names!r}}}), flush=True)")
    r = localneuron("estimate", "--script", str(script), "--world-size", "4")
    assert r.returncode == 0, r.stderr
    seen = json.loads(next(line for line in r.stderr.splitlines() if line.startswith("ENV ")).removeprefix("ENV "))
    assert seen == {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "4", "GROUP_RANK": "0",
                    "NODE_RANK": "0", "ROLE_RANK": "0", "ROLE_WORLD_SIZE": "4", "MASTER_ADDR": "127.0.0.1",
                    "MASTER_PORT": "29500"}


def test_ranks_fill_instances_in_turn_and_the_last_holds_the_remainder():
    # 100 ranks on instances of 64: rank 70 is the 7th of the 36 on the second instance
    env = launcher_environment(100, 70, 64)
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"], env["GROUP_RANK"], env["GROUP_WORLD_SIZE"]) == ("6", "36", "1", "2")
    env = launcher_environment(128, 5, 64)
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"], env["GROUP_RANK"]) == ("5", "64", "0")


@pytest.mark.parametrize("flags, message", [
    (["--world-size", "0"], "--world-size must be a positive integer"),
    (["--world-size", "-3"], "--world-size must be a positive integer"),
    (["--nodes", "0"], "--nodes must be a positive integer"),
    (["--nodes", "-1"], "--nodes must be a positive integer"),
    (["--nodes", "70000"], "more instances than any cluster has"),
])
def test_a_script_job_of_no_ranks_or_of_more_instances_than_exist_is_refused(tmp_path, flags, message):
    script = training_script(tmp_path / "train.py")
    assert message in single_line_refusal(localneuron("estimate", "--script", str(script), *flags))


# --- host reads of device values ------------------------------------------------------------------------
@pytest.mark.parametrize("guard", [
    "if not torch.isfinite(loss): raise RuntimeError('loss diverged')",
    "if torch.isnan(loss): raise RuntimeError('loss is NaN')",
    "if torch.isnan(loss).any(): raise RuntimeError('loss is NaN')",
    "assert torch.isfinite(loss).all()",
    "if not math.isfinite(loss.item()): raise RuntimeError('loss diverged')",
    "if torch.isinf(loss) | torch.isnan(loss): raise RuntimeError('loss diverged')",
    "if not torch.where(torch.isfinite(loss), torch.isfinite(loss), torch.isnan(loss)).cpu(): raise RuntimeError()",
])
def test_a_loss_guard_reads_what_a_healthy_run_reads_and_the_step_is_priced(tmp_path, guard):
    r = localneuron("estimate", "--script", str(training_script(tmp_path / "train.py", each_step=guard)),
                    "--world-size", "2")
    assert r.returncode == 0, r.stderr
    assert "its second optimizer step" in r.stdout


# --- the script's files ---------------------------------------------------------------------------------
def test_a_dry_run_leaves_the_checkpoint_and_log_the_script_would_overwrite_as_they_were(tmp_path):
    checkpoint, log = tmp_path / "ckpt.pt", tmp_path / "train.log"
    torch.save({"weight": torch.arange(6.0)}, checkpoint)
    log.write_text("the real run's log\n")
    before = checkpoint.read_bytes(), log.read_bytes()
    checkpoints = tmp_path / "checkpoints"
    script = cli_runner.write(tmp_path / "train.py", f"""\
        import os
        import torch

        model = torch.nn.Linear(16, 16).to("neuron")
        optimizer = torch.optim.AdamW(model.parameters())
        try:
            for step in range(3):
                model(torch.randn(4, 16, device="neuron")).pow(2).mean().backward()
                optimizer.step()
                optimizer.zero_grad()
                torch.save({{"model": model.state_dict(), "optimizer": optimizer.state_dict()}}, {str(checkpoint)!r})
                with open({str(log)!r}, "w") as f:
                    f.write(f"step {{step}}\\n")
                assert open({str(log)!r}).read() == f"step {{step}}\\n"   # a later read sees what the run wrote
                os.makedirs({str(checkpoints)!r}, exist_ok=True)
                torch.save(model.state_dict(), {str(checkpoints / "next.pt")!r})
                os.replace({str(checkpoints / "next.pt")!r}, {str(checkpoints / "last.pt")!r})
        except BaseException:   # an emergency save on any way out (the end of the priced step too)
            torch.save(model.state_dict(), {str(checkpoint)!r})
            raise
        """)
    r = localneuron("estimate", "--script", str(script), "--world-size", "2")
    assert r.returncode == 0, r.stderr
    assert (checkpoint.read_bytes(), log.read_bytes()) == before
    assert torch.equal(torch.load(checkpoint)["weight"], torch.arange(6.0))
    assert not checkpoints.exists()
    assert "4 file(s) it wrote went to the dry run's private directory and were discarded" in r.stdout


def test_removing_or_renaming_the_users_files_is_refused_saying_where_writes_go(tmp_path):
    log = tmp_path / "train.log"
    log.write_text("kept\n")
    attacks = [f"os.remove({str(log)!r})", f"os.rename({str(log)!r}, {str(tmp_path / 'moved')!r})",
               f"os.truncate({str(log)!r}, 0)", f"__import__('shutil').rmtree({str(tmp_path)!r})"]
    tries = "".join(f"""
try:
    {attack}
except PermissionError as refusal:
    print("REFUSED", refusal, flush=True)
""" for attack in attacks)
    r = localneuron("estimate", "--script", str(training_script(tmp_path / "train.py", before=tries)),
                    "--world-size", "2")
    assert r.returncode == 0, r.stderr
    refusals = [line for line in r.stderr.splitlines() if line.startswith("REFUSED")]
    assert len(refusals) == len(attacks) and all("dry runs do not write the script's files" in line
                                                 for line in refusals), r.stderr
    assert log.read_text() == "kept\n"


# --- the worker's end ---------------------------------------------------------------------------------
def test_a_thread_the_script_leaves_running_does_not_keep_the_estimate_waiting(tmp_path):
    stray = "threading.Thread(target=lambda: time.sleep(10 ** 6)).start()   # never ends, not a daemon"
    r = localneuron("estimate", "--script", str(training_script(tmp_path / "train.py", before=stray)),
                    "--world-size", "2", timeout=120)
    assert r.returncode == 0, r.stderr


def test_a_script_that_exits_abruptly_before_its_priced_step_is_explained(tmp_path):
    script = training_script(tmp_path / "train.py", each_step="if step == 1: os._exit(0)")
    line = single_line_refusal(localneuron("estimate", "--script", str(script), "--world-size", "2"))
    assert line.startswith(f"localneuron estimate: --script {script} exited (os._exit) before its second optimizer step")


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_stopped_estimate_kills_its_worker_and_removes_its_temporary_directory(tmp_path, signum):
    spin = "print('TRAINING', os.getpid(), flush=True)\nwhile True:\n    time.sleep(0.1)"
    script = training_script(tmp_path / "train.py", before=spin)
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    estimate = subprocess.Popen([sys.executable, "-m", "localneuron.cli.main", "estimate", "--script", str(script),
                                 "--world-size", "2"], cwd=ROOT, env={**os.environ, "TMPDIR": str(temporary)},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        worker = next((int(line.split()[1]) for line in estimate.stderr if line.startswith("TRAINING")), None)
        assert worker is not None, "the script never ran"
        estimate.send_signal(signum)
        assert estimate.wait(timeout=60) == 128 + signum
        assert f"stopped by {signal.Signals(signum).name}" in estimate.stderr.read()
    finally:
        estimate.kill()
        estimate.wait()
    for _ in range(300):   # the worker is gone (waited for by the estimate), at most 30 s after it stopped
        try:
            os.kill(worker, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        os.kill(worker, signal.SIGKILL)
        pytest.fail(f"the worker {worker} outlived the estimate")
    assert not list(temporary.glob("localneuron-estimate-*"))
