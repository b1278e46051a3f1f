"""Accelerate on `neuron`: Accelerator() picks the device in a plain process, `accelerate launch` runs
MULTI_NEURON ranks, save_state / load_state restore the run on every rank (safetensors onto `neuron` through
localneuron's integration), bf16 mixed precision trains, losses match the CPU (+ Gloo) run, and the fp16
refusal is one clear message, in the code and in the portability report."""
import re

import pytest
import torch

from hf_support import EXAMPLES, accelerate_launch, failing_python_script, python_script, require

require("transformers", "accelerate", "safetensors")

SCRIPT = EXAMPLES / "accelerate_train.py"


@pytest.fixture(scope="module")
def two_rank_runs():
    # the example's default state directory: rank 0 creates it, every rank saves and loads there, rank 0
    # removes it (run_script fails a run that leaves temporary files behind)
    return {name: accelerate_launch(2, SCRIPT, "--mixed-precision", "no", env=env)
            for name, env in (("neuron", {}), ("cpu", {"ACCELERATE_USE_CPU": "1"}))}


@pytest.fixture(scope="module")
def one_process_runs():
    return {name: python_script(SCRIPT, "--mixed-precision", precision, env=env)[0]
            for name, env, precision in (("neuron", {}, "no"), ("cpu", {"ACCELERATE_USE_CPU": "1"}, "no"),
                                         ("neuron-bf16", {}, "bf16"))}


def test_accelerator_without_a_launcher_trains_on_neuron_like_the_cpu(one_process_runs):
    device, cpu = one_process_runs["neuron"], one_process_runs["cpu"]
    assert device["distributed_type"] == "DistributedType.NO" and device["param_device"] == "neuron:0"
    assert cpu["param_device"] == "cpu"
    assert device["resumed"] == device["continued"]
    for key in ("losses", "continued"):
        assert device[key] == pytest.approx(cpu[key], abs=5e-3)


def test_launch_runs_one_neuron_core_per_rank(two_rank_runs):
    ranks = two_rank_runs["neuron"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert {r["distributed_type"] for r in ranks} == {"DistributedType.MULTI_NEURON"}
    assert [r["param_device"] for r in ranks] == ["neuron:0", "neuron:1"]


@pytest.mark.parametrize("run", ["neuron", "cpu"])
def test_load_state_restores_the_run_on_every_rank(two_rank_runs, run):
    for rank in two_rank_runs[run]:
        assert rank["resumed"] == rank["continued"], rank


def test_losses_match_the_cpu_gloo_run(two_rank_runs):
    for device, cpu in zip(two_rank_runs["neuron"], two_rank_runs["cpu"]):
        for key in ("losses", "continued"):
            assert device[key] == pytest.approx(cpu[key], abs=5e-3)


def test_bf16_mixed_precision_trains_close_to_fp32(one_process_runs):
    # in one process: Accelerator's autocast wraps the model's forward alike with or without a launcher
    bf16, fp32 = one_process_runs["neuron-bf16"], one_process_runs["neuron"]
    assert bf16["mixed_precision"] == "bf16" and fp32["mixed_precision"] == "no"
    assert bf16["resumed"] == bf16["continued"]
    assert bf16["losses"] == pytest.approx(fp32["losses"], abs=0.05)
    assert bf16["losses"] != fp32["losses"], "bf16 changed nothing: autocast did not run"


def test_fp16_refusal_says_what_to_do_instead():
    from accelerate import Accelerator

    from localneuron.integrations.hf import report

    with pytest.raises(ValueError, match=r"refuses mixed_precision='fp16' on the `neuron` device.*bf16"):
        Accelerator(mixed_precision="fp16")
    assert "accelerate_fp16" in report.collect()
    assert any("fp16" in line for line in report.render(report.collect()))


def test_fp16_run_stops_with_the_advice_not_a_chained_library_error():
    stderr = failing_python_script(SCRIPT, "--mixed-precision", "fp16")
    last_line = stderr.strip().splitlines()[-1]
    assert re.match(r"localneuron\.integrations\.hf\.accelerate_precision\.NeuronFp16Unsupported: "
                    r"Accelerate [\d.]+ refuses mixed_precision='fp16'", last_line), last_line
    assert "mixed_precision='bf16'" in last_line
    assert "During handling of the above exception" not in stderr  # upstream's ValueError is not chained


def test_safetensors_loads_onto_neuron_through_the_host(tmp_path):
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from localneuron.integrations.hf import report

    tensors = {"weight": torch.randn(4, 3), "bias": torch.arange(5)}
    save_file(tensors, tmp_path / "t.safetensors")
    for device in ("neuron", "neuron:1", torch.device("neuron", 0), 1):
        loaded = load_file(tmp_path / "t.safetensors", device=device)
        expected = torch.device(device if not isinstance(device, int) else f"neuron:{device}")
        for name, tensor in tensors.items():
            assert loaded[name].device.type == "neuron"
            assert expected.index is None or loaded[name].device.index == expected.index
            torch.testing.assert_close(loaded[name].cpu(), tensor)
    with safe_open(tmp_path / "t.safetensors", framework="pt", device="neuron:0") as f:
        assert sorted(f.keys()) == ["bias", "weight"]
        rows = f.get_slice("weight")[1:3]
        assert rows.device == torch.device("neuron:0")
        torch.testing.assert_close(rows.cpu(), tensors["weight"][1:3])
    assert load_file(tmp_path / "t.safetensors", device="cpu")["weight"].device.type == "cpu"
    assert any("safetensors refuses device 'neuron:N'" in line for line in report.render(report.collect()))
