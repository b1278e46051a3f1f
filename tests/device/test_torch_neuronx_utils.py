"""torch_neuronx.utils answers what TorchNeuron's own tests ask of it as the device behaves: is_sync_mode_enabled()
is true exactly when ops run at issue (NEURON_LAUNCH_BLOCKING, in every spelling the environment table accepts),
and use_mlir_aten_ops() is false, since localneuron lowers no op through MLIR."""
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


def test_no_op_is_lowered_through_mlir_even_when_torchneuron_would_be_asked_to():
    done = run_python("import torch_neuronx\nprint(torch_neuronx.utils.use_mlir_aten_ops())",
                      env={"TORCH_NEURONX_MLIR_ATEN_OPS": "1"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]
