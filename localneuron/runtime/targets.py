"""The Trainium chips the `neuron` device can simulate. TorchNeuron runs on Trn2 and Trn3; their
figures (logical cores at the default LNC, HBM per core, rates) are the cost model's table
(localneuron.costmodel.hardware), which also knows trn1 for `localneuron estimate`."""
from localneuron.costmodel.hardware import CHIPS, Chip as Target  # noqa: F401  (Target: the device's view of a chip)

DEVICE_TARGETS = ("trn2", "trn3")
TARGETS = {name: CHIPS[name] for name in DEVICE_TARGETS}
DEFAULT_TARGET = "trn2"
