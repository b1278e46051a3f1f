"""The Transformers Trainer on `neuron` with its default arguments plus bf16, gradient accumulation,
evaluation, checkpoints and resume_from_checkpoint: losses match the CPU run, in one process and under
`torchrun --nproc_per_node 2` (against CPU + Gloo, DDP with find_unused_parameters left at its default)."""
import pytest

from hf_support import EXAMPLES, python_script, require, torchrun

require("transformers", "accelerate", "tokenizers")

SCRIPT = EXAMPLES / "trainer_finetune.py"


def assert_same_run(device, cpu, abs_tolerance):
    for key in ("train_loss", "eval_loss"):
        assert device[key].keys() == cpu[key].keys()
        assert list(device[key].values()) == pytest.approx(list(cpu[key].values()), abs=abs_tolerance), key


def assert_resume_reproduces_the_run(run):
    assert run["checkpoints"] == ["checkpoint-2", "checkpoint-4"]
    for key in ("train_loss", "eval_loss"):
        assert run[f"resumed_{key}"] == run[key], key  # steps 3-4 recomputed from checkpoint-2


@pytest.fixture(scope="module")
def single_process(tmp_path_factory):
    return {name: python_script(SCRIPT, *flags, "--output-dir", str(tmp_path_factory.mktemp(name)))[0]
            for name, flags in (("neuron", ()), ("cpu", ("--cpu",)), ("neuron-bf16", ("--bf16",)))}


def test_single_process_trains_on_neuron_and_matches_the_cpu(single_process):
    run = single_process["neuron"]
    assert run["device"] == "neuron:0" and run["param_device"] == "neuron:0"
    assert_same_run(run, single_process["cpu"], 1e-3)


@pytest.mark.parametrize("name", ["neuron", "neuron-bf16", "cpu"])
def test_resume_from_checkpoint_reproduces_the_run(single_process, name):
    assert_resume_reproduces_the_run(single_process[name])


def test_bf16_trains_close_to_fp32(single_process):
    assert_same_run(single_process["neuron-bf16"], single_process["cpu"], 0.02)


def test_torchrun_two_ranks_match_cpu_gloo(tmp_path):
    device = torchrun(2, SCRIPT, "--output-dir", str(tmp_path / "neuron"))
    cpu = torchrun(2, SCRIPT, "--cpu", "--output-dir", str(tmp_path / "cpu"))
    assert [r["param_device"] for r in device] == ["neuron:0", "neuron:1"]
    assert {r["world_size"] for r in device} == {2}
    for rank_device, rank_cpu in zip(device, cpu):
        assert_same_run(rank_device, rank_cpu, 1e-3)
        assert_resume_reproduces_the_run(rank_device)
