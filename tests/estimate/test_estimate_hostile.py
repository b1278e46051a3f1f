"""`localneuron estimate` attacked: scripts that write checkpoints, guard their loss, start threads, exit
abruptly or are killed, configs and flags that are hostile. Each test is the attack or the user's
workflow that used to lose data, fail, hang or trace back; every bad input ends in one line and exit
status 2."""
import functools
import json
from pathlib import Path

import pytest

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
