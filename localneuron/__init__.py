"""localneuron: TorchNeuron's `neuron` device, simulated on any machine.

Importing this package (PyTorch does it on `import torch` through the torch.backends entry point)
registers the device; `torch_neuronx` holds TorchNeuron's public API names.
"""
from localneuron import _C  # noqa: F401  (loads the C++ core: allocator, guard, hooks, kernels)
from localneuron.device.registration import register as _register

_register()

__version__ = "0.1.0"
