"""Composite ops the device runs whole instead of through PyTorch's decomposition.

Two kinds: every structured op (PyTorch would allocate its output on the device and then run the
out= variant; running it whole is one executable instead of two dispatches, and avoids out=
resizes), and the explicit table below of CompositeExplicitAutograd ops that TorchNeuron implements
as single ops. Factory and copy ops are left to their decompositions: their results may belong to
the host.
"""
import torch

from localneuron import _C

# op -> why it is run whole
WHOLE_OPS = {
    "aten::_convolution": "would end in convolution_overrideable, a hook every device must implement",
    "aten::convolution": "would end in convolution_overrideable",
    "aten::convolution_backward": "would end in convolution_backward_overrideable",
    "aten::_scaled_dot_product_fused_attention_overrideable": "the device hook for fused SDPA; its default raises",
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": "the device hook's backward; its default raises",
    "aten::native_layer_norm": "decomposes into batch_norm on a reshaped input",
    "aten::native_group_norm": "decomposes into five ops, each rounding to bf16",
    "aten::embedding": "decomposes into index_select",
    "aten::mse_loss": "its out= decomposition resizes a 0-dim output, which PyTorch warns about",
    "aten::stack": "TorchNeuron lowers it as one op",
    "aten::repeat": "TorchNeuron lowers it as one op",
    "aten::constant_pad_nd": "TorchNeuron lowers it as one op",
    "aten::mean": "TorchNeuron lowers it as one op",
    "aten::masked_fill": "TorchNeuron lowers it as one op",
    "aten::slice_backward": "TorchNeuron lowers it as one op",
    "aten::clone": "one copy instead of empty_like + copy_",
    "aten::add": "scalar overloads wrap the scalar and redispatch",
    "aten::sub": "scalar overloads wrap the scalar and redispatch",
    "aten::mul": "scalar overloads wrap the scalar and redispatch",
    "aten::div": "scalar overloads wrap the scalar and redispatch",
    "aten::add_": "scalar overloads wrap the scalar and redispatch",
    "aten::sub_": "scalar overloads wrap the scalar and redispatch",
    "aten::mul_": "scalar overloads wrap the scalar and redispatch",
    "aten::div_": "scalar overloads wrap the scalar and redispatch",
}


# op-name prefix -> why every op with it is run whole
WHOLE_OP_FAMILIES = {
    "aten::_foreach_": "optimizers: one op per parameter list instead of one per tensor",
}

# op -> why its composite kernel cannot run on device tensors: it looks up a per-device DispatchStub or
# checks the device type. Every overload, out= included, runs whole (on host aliases). Found by running
# each CompositeExplicitAutograd op without a device kernel on `neuron` (tests/test_device_type_kernels.py).
DEVICE_TYPE_KERNELS = {
    "aten::kaiser_window": "calls kaiser_window_stub for the tensor's device (DispatchStub: missing kernel)",
    "aten::mode": "mode.values accepts only CPU, CUDA and XPU tensors",
}

STRUCTURED_KEY = "CompositeExplicitAutogradNonFunctional"


def route_whole_ops() -> None:
    for qualified in torch._C._dispatch_get_registrations_for_dispatch_key(STRUCTURED_KEY):
        if not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1"):
            _C.route_whole(qualified.split("::")[1])
    for qualified in torch._C._dispatch_get_all_op_names():
        name, _, overload = qualified.partition(".")
        listed = name in WHOLE_OPS or name.startswith(tuple(WHOLE_OP_FAMILIES))
        if ((listed and not overload.endswith("out")) or name in DEVICE_TYPE_KERNELS) and _decomposes_on_device(qualified):
            _C.route_whole(qualified.split("::")[1])


def _decomposes_on_device(qualified: str) -> bool:
    try:
        return (torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "CompositeExplicitAutograd")
                and not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1"))
    except RuntimeError:  # TorchScript-only overloads (add.t, ...) are not dispatcher ops
        return False
