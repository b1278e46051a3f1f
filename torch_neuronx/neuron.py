"""torch_neuronx.neuron: the device module (the same object PyTorch exposes as torch.neuron)."""
from localneuron.device.neuron_module import *  # noqa: F401,F403
