"""The Transformers Trainer on `neuron` with its default arguments plus bf16, gradient accumulation,
evaluation, checkpoints and resume_from_checkpoint: losses match the CPU run, in one process and under
`torchrun --nproc_per_node 2` (against CPU + Gloo, DDP with find_unused_parameters left at its default; bf16 in the
single process).
The example runs as users run it, with its default output directory (removed at the end)."""
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
    assert run["resumed_parameter_sums"] == run["parameter_sums"]


def assert_bf16_trains_close_to_fp32(bf16, fp32):
    assert bf16["mixed_precision"] == "bf16" and fp32["mixed_precision"] == "no"
    assert_same_run(bf16, fp32, 0.02)
    assert bf16["train_loss"] != fp32["train_loss"], "bf16=True changed nothing: autocast did not run"


@pytest.fixture(scope="module")
def single_process():
    return {name: python_script(SCRIPT, *flags)[0]
            for name, flags in (("neuron", ()), ("cpu", ("--cpu",)), ("neuron-bf16", ("--bf16",)))}


@pytest.fixture(scope="module")
def two_ranks():
    # bf16 is the single process's: autocast is per process, and DDP's reduction is the fp32 run's
    return {name: torchrun(2, SCRIPT, *flags) for name, flags in (("neuron", ()), ("cpu", ("--cpu",)))}


def test_single_process_trains_on_neuron_and_matches_the_cpu(single_process):
    run = single_process["neuron"]
    assert run["device"] == "neuron:0" and run["param_device"] == "neuron:0"
    assert single_process["cpu"]["param_device"] == "cpu"
    assert run["wrapper"] == "LlamaForCausalLM"  # one process: no DDP
    assert_same_run(run, single_process["cpu"], 1e-3)
    assert run["parameter_sums"] == pytest.approx(single_process["cpu"]["parameter_sums"], rel=1e-4)


@pytest.mark.parametrize("name", ["neuron", "neuron-bf16", "cpu"])
def test_resume_from_checkpoint_reproduces_the_run(single_process, name):
    assert_resume_reproduces_the_run(single_process[name])


def test_bf16_trains_close_to_fp32(single_process):
    assert_bf16_trains_close_to_fp32(single_process["neuron-bf16"], single_process["neuron"])


def test_torchrun_two_ranks_use_ddp_with_default_arguments(two_ranks):
    device = two_ranks["neuron"]
    assert [r["param_device"] for r in device] == ["neuron:0", "neuron:1"]
    assert [r["param_device"] for r in two_ranks["cpu"]] == ["cpu", "cpu"]
    for rank in device:
        assert rank["world_size"] == 2 and rank["wrapper"] == "DistributedDataParallel"
        assert rank["find_unused_parameters"] is True  # Trainer's default without activation checkpointing
    # the ranks saw different batches; identical replicas prove the gradients were all-reduced
    assert device[0]["parameter_sums"] == device[1]["parameter_sums"]


def test_torchrun_two_ranks_match_cpu_gloo(two_ranks):
    for rank_device, rank_cpu in zip(two_ranks["neuron"], two_ranks["cpu"]):
        assert_same_run(rank_device, rank_cpu, 1e-3)
        assert rank_device["parameter_sums"] == pytest.approx(rank_cpu["parameter_sums"], rel=1e-4)


@pytest.mark.parametrize("name", ["neuron", "cpu"])
def test_torchrun_resume_from_checkpoint_reproduces_the_run_on_every_rank(two_ranks, name):
    for rank in two_ranks[name]:
        assert_resume_reproduces_the_run(rank)
