"""The device kernels of composite ops whose records refuse a feature Neuron does not have.

A composite factory (sparse_csr_tensor, _nested_tensor_from_tensor_list...) would otherwise build the
layout around dense device tensors without ever reaching a kernel that refuses it: its dispatch key
is the layout's (SparseCsrPrivateUse1) or the dense one, and a composite kernel serves both. The
record's error is registered for both keys instead.
"""
import torch

KEYS = ("PrivateUse1", "SparseCsrPrivateUse1")
COMPOSITE_KEYS = ("CompositeExplicitAutograd", "CompositeImplicitAutograd")

_library = None


def _refusal(name: str, message: str):
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"{name}: {message}")
    return refuse


def _composite_without_device_kernel(qualified: str) -> bool:
    try:
        return (any(torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key) for key in COMPOSITE_KEYS)
                and not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1"))
    except RuntimeError:  # TorchScript-only overloads are not dispatcher ops
        return False


def register_refusals(unsupported: dict) -> None:
    """unsupported: "aten::name" -> the error (op_records.UNSUPPORTED), for every overload of the op."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")
    for qualified in torch._C._dispatch_get_all_op_names():
        name = qualified.partition(".")[0]
        if name in unsupported and _composite_without_device_kernel(qualified):
            for key in KEYS:
                _library.impl(qualified.removeprefix("aten::"), _refusal(name, unsupported[name]), key)
