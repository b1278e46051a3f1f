"""examples/torchtitan: TorchTitan 0.3.0's own trainer on `neuron` (installed by `pip install -e .[titan]`).

The assets test proves TorchTitan's own tokenizer and dataset loaders accept what the recipe builds
offline. The training tests run examples/torchtitan/run.sh with FSDP2 x TP on 4 NeuronCores, eagerly and with
every TransformerBlock compiled by backend `neuron` (real processes, backend `neuron`),
and the same jobs on the host with Gloo, and compare the losses; the checkpoint test runs FSDP2 on 2 eagerly,
stops after step 2 and resumes through TorchTitan's distributed checkpointing.
"""
import importlib.util
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest


def _torchtitan_installed() -> bool:
    # examples/torchtitan on sys.path is a namespace package of that name: look for the real trainer
    spec = importlib.util.find_spec("torchtitan")
    return spec is not None and spec.origin is not None


pytestmark = pytest.mark.skipif(not _torchtitan_installed(),
                                reason="torchtitan is not installed (pip install -e .[titan], in its own environment)")

RECIPE = Path(__file__).resolve().parents[2] / "examples" / "torchtitan"
LOSS = re.compile(r"step:\s*(\d+)\s+loss:\s*(\S+)")


def build_assets(root: Path) -> None:
    subprocess.run([sys.executable, str(RECIPE / "assets.py"), str(root)], check=True, timeout=300)


def test_torchtitan_loads_the_offline_tokenizer_and_dataset(tmp_path, monkeypatch):
    from torchtitan.components.tokenizer import HuggingFaceTokenizer
    from torchtitan.hf_datasets.text_datasets import DATASETS

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "cache"))
    build_assets(tmp_path)
    tokenizer = HuggingFaceTokenizer(tokenizer_path=str(tmp_path / "tokenizer"))
    assert tokenizer.get_vocab_size() <= 2048  # the debug model's embedding rows
    ids = tokenizer.encode("neuron core tensor engine.", add_bos=True, add_eos=True)
    assert ids[0] == tokenizer.bos_id and ids[-1] == tokenizer.eos_id
    assert tokenizer.decode(ids[1:-1]) == "neuron core tensor engine."
    dataset = DATASETS["c4_test"]
    rows = dataset.loader(str(tmp_path / "c4_test"))
    assert len(rows) == 400 and dataset.sample_processor(rows[0]).endswith(".")


def run_recipe(work: Path, ranks: int, overrides: tuple, reference_cpu: bool) -> subprocess.Popen:
    # TMPDIR: torchrun keeps a log directory per run in the temporary directory and never removes it
    env = {**os.environ, "TITAN_WORK_DIR": str(work), "PYTHON": sys.executable, "REFERENCE_CPU": str(int(reference_cpu)),
           "TMPDIR": str(work.parent)}
    return subprocess.Popen(["bash", str(RECIPE / "run.sh"), str(ranks), *overrides], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def losses(log: str) -> dict[int, float]:
    plain = re.sub(r"\x1b\[[0-9;]*m", "", log)  # TorchTitan colours its metrics line
    return {int(step): float(loss) for step, loss in LOSS.findall(plain)}


def run_to_end(*jobs: subprocess.Popen) -> list[str]:
    try:
        logs = [job.communicate(timeout=900)[0] for job in jobs]
    finally:
        for job in jobs:
            job.kill()
    for job, log in zip(jobs, logs):
        assert job.returncode == 0, log[-4000:]
    return logs


# torchrun's summary of a rank killed by a signal ("traceback : Signal 11 (SIGSEGV) received by PID 31077")
KILLED_BY_SIGNAL = re.compile(r"traceback\s*:\s*Signal \d+ \((SIG\w+)\) received")


def reference_log(job: subprocess.Popen, again) -> str:
    """The CPU + Gloo reference run's log. A rank of it was once killed by SIGSEGV inside Gloo's reduce-scatter
    (1 run in 3 of 2026-12-06, not reproduced since): the reference only supplies the losses to compare with,
    so a reference whose rank died by a signal runs once more, and the test warns with the crash, which stays
    an open defect (the CHANGELOG's tenth wave). The device's own run is never run again."""
    try:
        log = job.communicate(timeout=900)[0]
    finally:
        job.kill()
    signal = KILLED_BY_SIGNAL.search(log)
    if job.returncode != 0 and signal:
        warnings.warn(f"the CPU + Gloo reference run lost a rank to {signal[1]}; ran it again:\n{log[-1500:]}")
        (log,) = run_to_end(again())
    assert job.returncode == 0 or signal, log[-4000:]
    return log


def assert_losses_match(got: dict, want: dict, steps: list, tolerance: float) -> None:
    assert sorted(got) == steps and set(want) >= set(steps), (got, want)
    for step in steps:
        assert abs(got[step] - want[step]) < tolerance, (step, got, want)


COMPILE = ("--compile.enable", "--compile.backend", "neuron")


@pytest.fixture(scope="module")
def reference_logs() -> dict:
    """The CPU + Gloo reference runs' logs, by (ranks, overrides): a configuration's eager and compiled device runs
    compare with the same host run, which runs once (beside the first of them)."""
    return {}


# FSDP2 alone over 2 NeuronCores, eagerly, is test_distributed_checkpoint_resumes_where_it_stopped's first job
@pytest.mark.parametrize("ranks, overrides, tolerance", [
    (4, ("--parallelism.tensor_parallel_degree", "2"), 1e-4),  # FSDP2 (2) x TP (2)
    # each TransformerBlock compiled with backend neuron against the same eager host run (FSDP2 alone compiled adds
    # nothing this does not, at a minute of CPU); with TorchTitan's sequence parallelism each compiled block waits
    # for its input's reduce-scatter. The generated host kernels sum in another order than ATen's, so the losses
    # agree to rounding, not bit for bit
    (4, ("--parallelism.tensor_parallel_degree", "2", *COMPILE), 1e-3),
], ids=["fsdp2xtp", "fsdp2xtp-compiled"])
def test_llama3_debug_model_on_neuron_cores_matches_cpu_gloo(tmp_path, reference_logs, ranks, overrides, tolerance):
    reference = tuple(o for o in overrides if o not in COMPILE)
    key = ranks, reference
    neuron = run_recipe(tmp_path / "neuron", ranks, overrides, reference_cpu=False)
    cpu = None if key in reference_logs else run_recipe(tmp_path / "cpu", ranks, reference, reference_cpu=True)
    try:
        (neuron_log,) = run_to_end(neuron)
        if cpu is not None:
            reference_logs[key] = reference_log(cpu, lambda: run_recipe(tmp_path / "cpu-again", ranks, reference,
                                                                        reference_cpu=True))
    finally:
        if cpu is not None:
            cpu.kill()
    logs = [neuron_log, reference_logs[key]]
    assert "NEURON capacity: neuron" in logs[0] and "CPU capacity: cpu" in logs[1]  # TorchTitan's own device line
    if COMPILE[0] in overrides:
        assert "Compiling each TransformerBlock with torch.compile" in logs[0]
    assert_losses_match(losses(logs[0]), losses(logs[1]), [1, 2, 3], tolerance)


def test_distributed_checkpoint_resumes_where_it_stopped(tmp_path):
    """Steps 1-2 save a full DCP checkpoint (model, optimizer, schedule, dataloader) from 2 NeuronCores;
    a second job resumes from it for steps 3-4, whose losses equal an uninterrupted 4-step host run."""
    checkpoint = ("--checkpoint.enable", "--checkpoint.interval", "2", "--checkpoint.no-last-save-model-only")
    first, reference = run_to_end(
        run_recipe(tmp_path / "neuron", 2, ("--training.steps", "2", *checkpoint), reference_cpu=False),
        run_recipe(tmp_path / "cpu", 2, ("--training.steps", "4"), reference_cpu=True))
    assert list((tmp_path / "neuron" / "out" / "checkpoint").glob("step-2"))
    (resumed,) = run_to_end(run_recipe(tmp_path / "neuron", 2, ("--training.steps", "4", *checkpoint),
                                       reference_cpu=False))
    assert "Loading the checkpoint from" in resumed and "step-2" in resumed
    want = losses(reference)
    assert_losses_match(losses(first), want, [1, 2], 1e-4)
    assert_losses_match(losses(resumed), want, [3, 4], 1e-4)
