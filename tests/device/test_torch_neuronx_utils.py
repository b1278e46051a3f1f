"""torch_neuronx.utils answers what TorchNeuron's own tests ask of it as the device behaves: is_sync_mode_enabled()
is true exactly when ops run at issue (NEURON_LAUNCH_BLOCKING, in every spelling the environment table accepts),
and use_mlir_aten_ops() is true: localneuron behaves as TorchNeuron's torch-mlir lowering does (aten::-prefixed
tracked names, PyTorch's error wording, threshold / softplus / eye / dtype conversions on the device), whatever the
environment asks."""
import pytest

from fresh_python import run_python

# The answer, then whether the stream is idle right after a long kernel was issued: it is only when the kernel
# ran at issue (blocking), not when it was queued.
ANSWER_AND_BEHAVIOUR = """
import torch
from torch_neuronx.utils import is_sync_mode_enabled
torch.neuron._sleep(100000000)
print(is_sync_mode_enabled(), torch.neuron.current_stream().query())
"""


# the unset default and one spelling of each answer: the environment table's own tests cover every spelling
@pytest.mark.parametrize("spelling, blocking", [("", False), ("off", False), ("yes", True)])
def test_sync_mode_is_the_mode_the_device_runs_in(spelling, blocking):
    done = run_python(ANSWER_AND_BEHAVIOUR, env={"NEURON_LAUNCH_BLOCKING": spelling})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(blocking), str(blocking)]


def test_sync_mode_refuses_a_value_the_device_refuses():
    done = run_python("from torch_neuronx.utils import is_sync_mode_enabled\nis_sync_mode_enabled()",
                      env={"NEURON_LAUNCH_BLOCKING": "maybe"})
    assert done.returncode != 0
    assert "NEURON_LAUNCH_BLOCKING='maybe' is not valid" in done.stderr


@pytest.mark.parametrize("switch", [None, "0"])  # unset, and set to the other path
def test_the_device_answers_as_torch_mlirs_lowering_whatever_the_environment_asks(switch):
    code = ("import os, torch, torch_neuronx\n"
            "print(os.environ['TORCH_NEURONX_MLIR_ATEN_OPS'])\n"
            "print(torch_neuronx.utils.use_mlir_aten_ops())\n"
            "x = torch.arange(-2.0, 2.0, device='neuron')\n"
            "torch.neuron.synchronize()\n"
            "torch_neuronx.clear_op_tracking()\n"
            "torch.nn.functional.threshold(x, 0.5, 0.0)\n"
            "torch.neuron.synchronize()\n"
            "print(sorted(torch_neuronx.get_executed_ops()), torch_neuronx.get_fallback_ops())\n")
    done = run_python(code, env={} if switch is None else {"TORCH_NEURONX_MLIR_ATEN_OPS": switch})
    assert done.returncode == 0, done.stderr
    variable, answer, ops = done.stdout.splitlines()[:3]
    # programs that read the switch themselves see the path the device is, unless the user set it
    assert variable == (switch or "1")
    assert ("TORCH_NEURONX_MLIR_ATEN_OPS='0' is not valid" in done.stderr) == (switch == "0")
    # what the answer promises: the op ran on the device under its aten::-prefixed name
    assert answer == "True" and ops == "['aten::threshold'] []"


@pytest.mark.parametrize("switch", [None, "1", "0"])  # unset, TorchNeuron's default, and its other path
def test_the_stablehlo_switch_has_one_value_here_and_another_warns_once_at_import(switch):
    """TORCH_NEURONX_ENABLE_STABLEHLO (TorchNeuron's internal lowering switch, 1 by default): localneuron's eager path
    is the StableHLO one, so 0 warns once when torch_neuronx is imported and the device runs as ever."""
    code = ("import torch, torch_neuronx\n"
            "print((torch.ones(2, device='neuron') + 1).cpu().tolist())\n")
    done = run_python(code, env={} if switch is None else {"TORCH_NEURONX_ENABLE_STABLEHLO": switch})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[0] == "[2.0, 2.0]"
    assert done.stderr.count("TORCH_NEURONX_ENABLE_STABLEHLO='0' is not valid") == (switch == "0")


@pytest.mark.parametrize("env, platform", [({}, "trn2"), ({"LOCALNEURON_TARGET": "trn3"}, "trn3"),
                                           ({"NEURON_PLATFORM_TARGET_OVERRIDE": "gen2"}, "trn1"),
                                           ({"NEURON_PLATFORM_TARGET_OVERRIDE": "trn3"}, "trn3")])
def test_platform_target_is_the_generation_nki_kernels_are_built_for(env, platform):
    # empty is unset: this process may hold an override another test's import left (benchmarks/calibration.py's)
    unset = {"NEURON_PLATFORM_TARGET_OVERRIDE": "", "LOCALNEURON_TARGET": ""}
    answer, generation = printed("from torch_neuronx.utils import get_platform_target\n"
                                 "from localneuron.nki import generation\n"
                                 "print(get_platform_target(), generation.current().name)\n", {**unset, **env})
    assert answer == platform and generation == {"trn1": "gen2", "trn2": "gen3", "trn3": "gen4"}[platform]


def test_platform_target_refuses_a_bad_override():
    done = run_python("from torch_neuronx.utils import get_platform_target\nget_platform_target()",
                      env={"NEURON_PLATFORM_TARGET_OVERRIDE": "gen9"})
    assert done.returncode != 0 and "NEURON_PLATFORM_TARGET_OVERRIDE='gen9' is not valid" in done.stderr


@pytest.mark.parametrize("env, disabled", [({}, False), ({"TORCH_NEURONX_DISABLE_NEFF_CACHE": "1"}, True),
                                           ({"TORCH_NEURONX_DISABLE_NEFF_CACHE": "no"}, False),
                                           ({"TORCH_NEURONX_NEFF_DISABLE_CACHE": "true"}, True)])
def test_neff_cache_switch_is_the_compilers_decision(env, disabled):
    assert printed("import torch_neuronx.utils as utils\n"
                   "from localneuron.compiler.settings import cache_settings\n"
                   "print(utils.is_neff_cache_disabled(), not cache_settings().enabled, utils.is_stablehlo_enabled())\n",
                   {"TORCH_NEURONX_DISABLE_NEFF_CACHE": "", "TORCH_NEURONX_NEFF_DISABLE_CACHE": "", **env}
                   ) == [str(disabled), str(disabled), "True"]


def printed(code: str, env: dict) -> list[str]:
    """What a fresh interpreter running `code` with `env` prints, split into words; it must succeed."""
    done = run_python(code, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()
