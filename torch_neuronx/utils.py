"""torch_neuronx.utils: the questions about the running configuration that TorchNeuron's own tests ask, answered
from what localneuron actually does."""
from localneuron.runtime.environment import read


def is_sync_mode_enabled() -> bool:
    """True when the device runs blocking (NEURON_LAUNCH_BLOCKING=1): every op runs when it is issued and raises
    there, instead of queueing per NeuronCore and stream while Python runs ahead. The value comes from the
    environment table (localneuron/runtime/environment.py) that also configured the device, with its spellings
    and its error for a bad value."""
    return read("NEURON_LAUNCH_BLOCKING")


def use_mlir_aten_ops() -> bool:
    """Whether ATen ops are lowered through torch-mlir. In TorchNeuron this is an internal switch of its op
    compiler (an environment variable of its own, not documented as public); the tests ask it to tell which
    behaviours and error types to expect from the MLIR lowerings rather than the default ones. localneuron lowers
    no op through MLIR, so it is always False here."""
    return False
