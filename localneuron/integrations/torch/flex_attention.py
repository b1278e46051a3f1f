"""FlexAttention on `neuron`: PyTorch 2.13 gates flex_attention to a fixed list of device types.

TorchNeuron runs FlexAttention on the NeuronCore (eager, and as compiled regions in "mixed mode",
docs/support-matrix.md#torchcompile). Here its eager implementation (the dense reference, differentiable) runs on
the device, and the `neuron` compile backend runs the flex_attention higher-order ops eagerly inside compiled graphs
(compiler/partition.py). Only the device gate is widened; every other check of PyTorch's stays.
"""


def patch(module) -> None:
    validate = module._validate_device

    def validate_device(query, key, value):
        if query.device.type != "neuron":
            validate(query, key, value)

    module._validate_device = validate_device
