"""device_map="auto" on `neuron`: Accelerate budgets the NeuronCores' HBM (localneuron's integration,
since its get_max_memory has no `neuron` branch), places the model on the cores, spills to the CPU when
the cores are full, and the placed model computes what the CPU computes."""
import json

import pytest
import torch

from fresh_python import run_python
from hf_support import require, tiny_llama

require("transformers", "accelerate")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny-llama")
    tiny_llama(hidden_size=64, intermediate_size=128, num_hidden_layers=4).save_pretrained(path)
    return path


def test_get_max_memory_lists_every_core_with_its_hbm_then_the_host():
    from accelerate.utils import get_max_memory

    budget = get_max_memory()
    cores = torch.neuron.device_count()
    assert list(budget) == [*range(cores), "cpu"]
    for index in range(cores):
        free, capacity = torch.neuron.mem_get_info(index)
        assert budget[index] == free and 0 < free <= capacity


def test_user_budget_is_converted_and_a_missing_core_is_named():
    from accelerate.utils import get_max_memory

    assert get_max_memory({"cpu": "1GB", 0: "2MB"}) == {0: 2 * 10**6, "cpu": 10**9}
    with pytest.raises(ValueError, match="NeuronCore 99.*NEURON_RT_VISIBLE_CORES"):
        get_max_memory({99: "1GB"})


def test_auto_places_the_model_on_neuron_and_matches_the_cpu(checkpoint):
    from transformers import LlamaForCausalLM

    placed = LlamaForCausalLM.from_pretrained(checkpoint, device_map="auto")
    reference = LlamaForCausalLM.from_pretrained(checkpoint)
    assert {p.device.type for p in placed.parameters()} == {"neuron"}
    ids = torch.tensor([[5, 17, 3, 99, 42, 7]])
    torch.testing.assert_close(placed(ids.to("neuron")).logits.cpu(), reference(ids).logits)
    generated = placed.generate(ids.to("neuron"), max_new_tokens=6, do_sample=False)
    assert generated.cpu().tolist() == reference.generate(ids, max_new_tokens=6, do_sample=False).tolist()


SPILL = """
import json, sys, torch
from transformers import LlamaForCausalLM
budget, compute = BUDGET, COMPUTE
placed = LlamaForCausalLM.from_pretrained(CHECKPOINT, device_map="auto", max_memory=budget)
report = {"map": {k: str(v) for k, v in placed.hf_device_map.items()}}
if compute:
    reference = LlamaForCausalLM.from_pretrained(CHECKPOINT)
    ids = torch.tensor([[5, 17, 3, 99]])
    report["match"] = torch.allclose(placed(ids.to("neuron:0")).logits.cpu(), reference(ids).logits, atol=1e-5,
                                     rtol=1e-4)
print(json.dumps(report))
"""


def _place(checkpoint, bytes_per_core: int, budget=None, compute=True) -> dict:
    script = SPILL.replace("CHECKPOINT", repr(str(checkpoint))).replace("BUDGET", repr(budget)).replace(
        "COMPUTE", repr(compute))
    result = run_python(script, env={"LOCALNEURON_HBM_BYTES_PER_CORE": str(bytes_per_core),
                                     "NEURON_RT_VISIBLE_CORES": "0-1", "TORCH_NEURONX_LOG_LEVEL": "0"}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report.get("match", True), report
    return report["map"]


def _spilled_tail(placements: dict) -> bool:
    """Accelerate fills the devices in module order: the CPU holds the model's tail."""
    order = list(placements.values())
    return "cpu" in order and set(order[order.index("cpu"):]) == {"cpu"}


# The checkpoint holds 0.66 MB of fp32 weights (a decoder layer is 147 kB); two NeuronCores are visible and
# no max_memory is given: the cores' simulated HBM capacity decides.
def test_a_model_larger_than_one_core_is_split_across_cores(checkpoint):
    placements = _place(checkpoint, 500_000)  # one core cannot hold it, two can
    assert set(placements.values()) == {"0", "1"}, placements


def test_a_model_larger_than_every_core_spills_to_the_cpu(checkpoint):
    # both cores fill up to the brim with weights, as Accelerate fills GPUs, and the rest stays on the host;
    # the full cores leave no room for activations (a GPU would run out of memory too), so no forward here
    placements = _place(checkpoint, 300_000, compute=False)
    assert {"0", "1"} <= set(placements.values()) and _spilled_tail(placements), placements


def test_a_spilled_model_computes_what_the_cpu_computes(checkpoint):
    # as on GPUs, leave each core room for activations: weights may take 160 of its 1000 kB
    placements = _place(checkpoint, 1_000_000, budget={0: 160_000, 1: 160_000, "cpu": 10**9})
    assert set(placements.values()) & {"0", "1"} and _spilled_tail(placements), placements
