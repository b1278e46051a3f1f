"""PEFT LoRA and DoRA on `neuron`: training matches the CPU, the adapter saves, loads back onto the device
with torch_device="neuron" (safetensors through localneuron's integration) and merges without changing
what the model computes. The example script runs as users run it."""
import sys

import pytest

from hf_support import EXAMPLES, python_script, require

require("transformers", "peft", "safetensors", "tokenizers")
sys.path.insert(0, str(EXAMPLES))


@pytest.mark.parametrize("dora", [False, True], ids=["lora", "dora"])
def test_adapter_trains_saves_loads_and_merges_on_neuron_like_the_cpu(dora, quiet):
    import lora_finetune

    from localneuron.integrations.hf import notes

    before = notes.bridged().get("safetensors_device", 0)
    device, cpu = lora_finetune.run("neuron", dora), lora_finetune.run("cpu", dora)
    assert device["losses"] == pytest.approx(cpu["losses"], abs=1e-4)
    assert device["losses"][-1] < device["losses"][0]
    assert device["adapter_devices"] == ["neuron:0"]
    assert "adapter_model.safetensors" in device["adapter_files"]
    assert device["reload_max_diff"] < 1e-5 and device["merge_max_diff"] < 1e-4
    assert notes.bridged()["safetensors_device"] > before  # torch_device="neuron" read through the host


def test_example_script_runs():
    (result,) = python_script(EXAMPLES / "lora_finetune.py", "--dora")
    assert result["device"] == "neuron" and result["merge_max_diff"] < 1e-4
