"""TRL on `neuron`: SFTTrainer and DPOTrainer run a few steps of a tiny Llama on the device (picked by the
Trainer itself) and their losses (and DPO's reward margins) match the CPU run."""
import pytest

from hf_support import EXAMPLES, python_script, require

require("transformers", "accelerate", "trl", "datasets", "tokenizers")

SCRIPT = EXAMPLES / "trl_train.py"


@pytest.mark.parametrize("trainer", ["sft", "dpo"])
def test_trainer_runs_on_neuron_and_matches_the_cpu(trainer):
    (device,) = python_script(SCRIPT, "--trainer", trainer)
    (cpu,) = python_script(SCRIPT, "--trainer", trainer, "--cpu")
    assert device["param_device"] == "neuron:0" and cpu["param_device"] == "cpu"
    assert len(device["losses"]) == 3
    assert device["losses"] == pytest.approx(cpu["losses"], abs=1e-3)
    assert device["losses"][-1] < device["losses"][0]
    assert len(device["rewards_margins"]) == (3 if trainer == "dpo" else 0)
    assert device["rewards_margins"] == pytest.approx(cpu["rewards_margins"], abs=2e-3)
