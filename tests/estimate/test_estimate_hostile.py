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


def assert_one_line_refusal(status: int, stderr: str) -> str:
    """The one line a refused request prints (with exit status 2, no traceback)."""
    assert status == 2, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("localneuron estimate: ") and "Traceback" not in stderr, stderr
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
    assert [env[n] for n in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE")] == ["6", "36", "1", "2"]
    env = launcher_environment(128, 5, 64)
    assert (env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"], env["GROUP_RANK"]) == ("5", "64", "0")


@pytest.mark.parametrize("flags, message", [
    (["--world-size", "0"], "--world-size must be a positive integer"),
    (["--world-size", "-3"], "--world-size must be a positive integer"),
    (["--nodes", "0"], "--nodes must be a positive integer"),
    (["--nodes", "-1"], "--nodes must be a positive integer"),
    (["--nodes", "70000"], "more instances than any cluster has"),
])
def test_a_script_job_of_no_ranks_or_of_more_instances_than_exist_is_refused(tmp_path, capsys, flags, message):
    from localneuron.cli.main import main

    script = training_script(tmp_path / "train.py")
    status = main(["estimate", "--script", str(script), *flags])  # refused before a worker starts: in this process
    assert message in assert_one_line_refusal(status, capsys.readouterr().err)


# --- host reads of device values ------------------------------------------------------------------------
LOSS_GUARDS = [
    "if not torch.isfinite(loss): raise RuntimeError('loss diverged')",
    "if torch.isnan(loss): raise RuntimeError('loss is NaN')",
    "if torch.isnan(loss).any(): raise RuntimeError('loss is NaN')",
    "assert torch.isfinite(loss).all()",
    "if not math.isfinite(loss.item()): raise RuntimeError('loss diverged')",
    "if torch.isinf(loss) | torch.isnan(loss): raise RuntimeError('loss diverged')",
    "if not torch.where(torch.isfinite(loss), torch.isfinite(loss), torch.isnan(loss)).cpu(): raise RuntimeError()",
]


def test_a_loss_guard_reads_what_a_healthy_run_reads_and_the_step_is_priced(tmp_path):
    # every guard in one script, each on a line of its own: a guard that reads an unhealthy value stops the dry run,
    # and the traceback in stderr names its line
    r = localneuron("estimate", "--script", str(training_script(tmp_path / "train.py", each_step="\n".join(LOSS_GUARDS))),
                    "--world-size", "2")
    assert r.returncode == 0, r.stderr
    assert "its second optimizer step" in r.stdout


def test_a_loss_guard_that_reads_an_unhealthy_value_stops_the_dry_run_and_is_named(tmp_path):
    guard = "if torch.isfinite(loss): raise RuntimeError('the guard read a finite loss')"
    r = localneuron("estimate", "--script", str(training_script(tmp_path / "train.py", each_step=guard)))
    assert r.returncode != 0 and "the guard read a finite loss" in r.stderr, (r.returncode, r.stderr[-2000:])


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


def test_the_users_files_are_neither_removed_nor_renamed_nor_truncated(tmp_path):
    log, old = tmp_path / "train.log", tmp_path / "step-100.pt"
    log.write_text("kept\n")
    old.write_text("an old checkpoint\n")
    rotation = f"""
os.remove({str(old)!r})   # a checkpoint rotation: gone for the run, kept on disk
assert not os.path.exists({str(old)!r})
try:
    os.remove({str(tmp_path / "never-written.pt")!r})
except FileNotFoundError:
    print("NOTHING TO REMOVE", flush=True)
"""
    attacks = [f"os.rename({str(log)!r}, {str(tmp_path / 'moved')!r})", f"os.truncate({str(log)!r}, 0)",
               f"__import__('shutil').rmtree({str(tmp_path)!r})"]
    tries = "".join(f"""
try:
    {attack}
except PermissionError as refusal:
    print("REFUSED", refusal, flush=True)
""" for attack in attacks)
    r = localneuron("estimate", "--script", str(training_script(tmp_path / "train.py", before=rotation + tries)),
                    "--world-size", "2")
    assert r.returncode == 0, r.stderr
    assert "NOTHING TO REMOVE" in r.stderr
    refusals = [line for line in r.stderr.splitlines() if line.startswith("REFUSED")]
    assert len(refusals) == len(attacks) and all("dry runs do not write the script's files" in line
                                                 for line in refusals), r.stderr
    assert log.read_text() == "kept\n" and old.read_text() == "an old checkpoint\n"


def test_a_distributed_checkpoint_over_an_existing_one_leaves_it_as_it_was(tmp_path):
    existing = tmp_path / "checkpoint"
    existing.mkdir()
    (existing / ".metadata").write_text("the real run's\n")
    save = f"torch.distributed.checkpoint.save({{'model': model.state_dict()}}, checkpoint_id={str(existing)!r})"
    r = localneuron("estimate", "--script", str(training_script(tmp_path / "train.py", before="import "
                                                                "torch.distributed.checkpoint", each_step=save)),
                    "--world-size", "2")
    assert r.returncode == 0, r.stderr
    assert [p.name for p in existing.iterdir()] == [".metadata"]
    assert (existing / ".metadata").read_text() == "the real run's\n"


# --- the worker's end ---------------------------------------------------------------------------------
def test_a_thread_the_script_leaves_running_does_not_keep_the_estimate_waiting(tmp_path):
    stray = "threading.Thread(target=lambda: time.sleep(10 ** 6)).start()   # never ends, not a daemon"
    r = localneuron("estimate", "--script", str(training_script(tmp_path / "train.py", before=stray)),
                    "--world-size", "2", timeout=120)
    assert r.returncode == 0, r.stderr


def test_a_script_that_exits_abruptly_before_its_priced_step_is_explained(tmp_path):
    script = training_script(tmp_path / "train.py", each_step="if step == 1: os._exit(0)")
    r = localneuron("estimate", "--script", str(script), "--world-size", "2")
    line = assert_one_line_refusal(r.returncode, r.stderr)
    assert line.startswith(f"localneuron estimate: --script {script} exited (os._exit) before its second optimizer "
                           f"step")


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


# --- hostile configs and flags ----------------------------------------------------------------------------
LLAMA = {"model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256, "rms_norm_eps": 1e-05,
         "tie_word_embeddings": False}
MIXTRAL = {**LLAMA, "model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}
QWEN_MOE = {**LLAMA, "model_type": "qwen2_moe", "num_experts": 60, "num_experts_per_tok": 4,
            "moe_intermediate_size": 1408, "shared_expert_intermediate_size": 5632}
LLAMA4 = {"model_type": "llama4", "text_config": {**LLAMA, "num_local_experts": 16, "num_experts_per_tok": 1}}
GPT2 = {"model_type": "gpt2", "n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257}
VIT = {"model_type": "vit", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
       "intermediate_size": 3072}


def _text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value)


HOSTILE_CONFIGS = {
    # sizes beyond any model, under the old overflow limit, or whose products overflow
    "layers 2**39": ({**LLAMA, "num_hidden_layers": 2 ** 39}, "num_hidden_layers"),
    "layers a million": ({**LLAMA, "num_hidden_layers": 10 ** 6}, "num_hidden_layers"),
    "hidden 2**30": ({**LLAMA, "hidden_size": 2 ** 30}, "hidden_size"),
    "vocab 2**35": ({**LLAMA, "vocab_size": 2 ** 35}, "vocab_size"),
    "intermediate 2**38": ({**LLAMA, "intermediate_size": 2 ** 38}, "intermediate_size"),
    "heads 2**20": ({**LLAMA, "num_attention_heads": 2 ** 20}, "num_attention_heads"),
    "head_dim 2**30": ({**LLAMA, "head_dim": 2 ** 30}, "head_dim"),
    "experts 2**30": ({**MIXTRAL, "num_local_experts": 2 ** 30}, "num_local_experts"),
    "every size at its limit": ({**MIXTRAL, "num_hidden_layers": 10_000, "hidden_size": 1 << 20,
                                 "intermediate_size": 1 << 22, "num_local_experts": 1 << 14}, "parameters"),
    "positions 2**40": ({**GPT2, "n_positions": 2 ** 40}, "n_positions"),
    "image of 2**30 patches": ({**VIT, "image_size": 1 << 15, "patch_size": 1}, "tokens"),
    "shared expert 2**39": ({**QWEN_MOE, "shared_expert_intermediate_size": 2 ** 39},
                            "shared_expert_intermediate_size"),
    "huge integer literal": ('{"model_type": "llama", "hidden_size": 1' + "0" * 5000 + "}", "not valid JSON"),
    # wrong JSON types where numbers go
    "hidden a string": ({**LLAMA, "hidden_size": "4096"}, "hidden_size"),
    "layers a float": ({**LLAMA, "num_hidden_layers": 32.5}, "num_hidden_layers"),
    "layers a list": ({**LLAMA, "num_hidden_layers": [32]}, "num_hidden_layers"),
    "layers an object": ({**LLAMA, "num_hidden_layers": {"n": 32}}, "num_hidden_layers"),
    "layers null": ({**LLAMA, "num_hidden_layers": None}, "num_hidden_layers"),
    "layers a boolean": ({**LLAMA, "num_hidden_layers": True}, "num_hidden_layers"),
    "layers negative": ({**LLAMA, "num_hidden_layers": -4}, "num_hidden_layers"),
    "vocab zero": ({**LLAMA, "vocab_size": 0}, "vocab_size"),
    "experts a string": ({**MIXTRAL, "num_local_experts": "8"}, "num_local_experts"),
    "shared expert a string": ({**QWEN_MOE, "shared_expert_intermediate_size": "big"},
                               "shared_expert_intermediate_size"),
    "dense-only layers a number": ({**QWEN_MOE, "mlp_only_layers": 5}, "mlp_only_layers"),
    "dense-only layers of booleans": ({**QWEN_MOE, "mlp_only_layers": [True]}, "mlp_only_layers"),
    "MoE layers a string": ({**LLAMA4, "text_config": {**LLAMA4["text_config"], "moe_layers": "all"}}, "moe_layers"),
    "sparse step zero": ({**QWEN_MOE, "decoder_sparse_step": 0}, "decoder_sparse_step"),
    "dropout a string": ({**LLAMA, "attention_dropout": "0.1"}, "attention_dropout"),
    "ViT channels a list": ({**VIT, "num_channels": [3]}, "num_channels"),
    # booleans that are not JSON booleans
    "tie a string": ({**LLAMA, "tie_word_embeddings": "false"}, "tie_word_embeddings"),
    "tie a number": ({**LLAMA, "tie_word_embeddings": 0}, "tie_word_embeddings"),
    "attention bias a string": ({**LLAMA, "attention_bias": "yes"}, "attention_bias"),
    "MLP bias a list": ({**LLAMA, "mlp_bias": []}, "mlp_bias"),
    "GPT tie a string": ({**GPT2, "tie_word_embeddings": "true"}, "tie_word_embeddings"),
    # non-finite numbers (Python's json reads them)
    "eps NaN": (json.dumps(LLAMA)[:-1] + ', "rms_norm_eps": NaN}', "NaN"),
    "eps Infinity": (json.dumps(LLAMA)[:-1] + ', "rope_theta": Infinity}', "Infinity"),
    "eps -Infinity": (json.dumps(LLAMA)[:-1] + ', "rope_theta": -Infinity}', "Infinity"),
    "eps overflowing to infinity": (json.dumps(LLAMA)[:-1] + ', "rope_theta": 1e400}', "1e400"),
    "dropout NaN": (json.dumps(LLAMA)[:-1] + ', "attention_dropout": NaN}', "NaN"),
    # the model's type and the nested text config
    "model_type a number": ({**LLAMA, "model_type": 42}, "model_type"),
    "model_type a list": ({**LLAMA, "model_type": ["llama"]}, "model_type"),
    "model_type null": ({**LLAMA, "model_type": None}, "model_type"),
    "text_config a string": ({**LLAMA4, "text_config": "llama"}, "text_config"),
    "text_config a list": ({**LLAMA4, "text_config": [LLAMA]}, "text_config"),
    "text_config with a string size": ({**LLAMA4, "text_config": {**LLAMA4["text_config"], "hidden_size": "big"}},
                                       "hidden_size"),
    # not a JSON object, not JSON, not UTF-8
    "a list": ([LLAMA], "JSON object"),
    "a string": ('"llama"', "JSON object"),
    "null": ("null", "JSON object"),
    "a number": ("4096", "JSON object"),
    "nested too deeply": ("[" * 100_000 + "]" * 100_000, "not valid JSON"),
    "an object nested too deeply": ('{"a": ' * 100_000 + "1" + "}" * 100_000, "not valid JSON"),
    "invalid UTF-8": (b'{"model_type": "llama\xff\xfe"}', "not valid JSON"),
    "truncated": (json.dumps(LLAMA)[:40], "not valid JSON"),
    "empty": ("", "not valid JSON"),
}


def estimate_in_process(capsys, *argv) -> tuple[int, str]:
    from localneuron.cli.main import main

    status = main(["estimate", *argv])
    return status, capsys.readouterr().err


@pytest.mark.parametrize("name", HOSTILE_CONFIGS)
def test_a_hostile_config_is_refused_in_one_line(tmp_path, capsys, name):
    content, field = HOSTILE_CONFIGS[name]
    path = tmp_path / "config.json"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(_text(content))
    line = assert_one_line_refusal(*estimate_in_process(capsys, "--hf-config", str(path), "--mode", "train",
                                                        "--target", "trn1"))
    assert field in line


def test_a_config_file_of_a_gigabyte_is_not_read(tmp_path, capsys):
    huge = tmp_path / "config.json"
    with open(huge, "wb") as f:
        f.truncate(1 << 30)   # sparse: no disk used
    line = assert_one_line_refusal(*estimate_in_process(capsys, "--hf-config", str(huge), "--mode", "train"))
    assert "bytes" in line


def test_the_config_table_holds_at_least_forty_attacks():
    assert len(HOSTILE_CONFIGS) >= 40


@pytest.mark.parametrize("flags", [
    ["--nodes", "0"], ["--nodes", "-1"], ["--nodes", "70000"], ["--world-size", "0"], ["--world-size", "-3"],
    ["--tp", "0"], ["--seq", "0"], ["--seq", "-1"], ["--seq", str(2 ** 62)], ["--global-batch", "0"],
    ["--micro-batch", "-1"], ["--mode", "decode", "--batch", "0"], ["--mode", "prefill", "--input-len", str(2 ** 62)],
    ["--mode", "decode", "--output-len", "0"],
])
def test_a_hostile_flag_is_refused_in_one_line(capsys, flags):
    mode = [] if "--mode" in flags else ["--mode", "train"]
    assert_one_line_refusal(*estimate_in_process(capsys, "--hf-config", str(ROOT / "benchmarks" / "configs" /
                                                                            "llama-3-8b.json"), *mode, *flags))


@pytest.mark.parametrize("name", ["layers 2**39", "tie a string", "eps NaN", "text_config with a string size"])
def test_a_hostile_config_is_refused_before_transformers_builds_it_as_written(tmp_path, capsys, name):
    pytest.importorskip("transformers")
    content, field = HOSTILE_CONFIGS[name]
    path = tmp_path / "config.json"
    path.write_text(_text(content))
    line = assert_one_line_refusal(*estimate_in_process(capsys, "--hf-config", str(path), "--as-written", "--mode",
                                                        "train", "--target", "trn1"))
    assert field in line


def test_a_rank_that_never_reaches_its_priced_step_is_stopped_after_the_bound(tmp_path, monkeypatch):
    from localneuron.costmodel.hardware import chip
    from localneuron.estimate import script as script_run

    monkeypatch.setattr(script_run, "WORKER_TIMEOUT_S", 5)
    # the workers as started (on a busy machine a worker may still be importing torch when the bound ends it, so
    # its pid is taken from its start, not from a line the script prints)
    started = []
    popen = script_run.subprocess.Popen
    monkeypatch.setattr(script_run.subprocess, "Popen", lambda *a, **k: started.append(popen(*a, **k)) or started[-1])
    spin = "while True:\n    time.sleep(0.1)"
    with pytest.raises(ValueError, match="for 5 s without ending its second optimizer step: stopped"):
        script_run.estimate(str(training_script(tmp_path / "train.py", before=spin)), [], chip("trn2"), 2)
    assert started and all(worker.returncode is not None for worker in started)   # waited for
    for worker in started:
        with pytest.raises(ProcessLookupError):   # killed, with its session
            os.killpg(worker.pid, 0)
