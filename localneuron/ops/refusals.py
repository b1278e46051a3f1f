"""The device kernels of composite ops whose records refuse a feature Neuron does not have.

A composite factory (sparse_csr_tensor, _nested_tensor_from_tensor_list...) would otherwise build the
layout around dense device tensors without ever reaching a kernel that refuses it: its dispatch key
is the layout's (SparseCsrPrivateUse1) or the dense one, and a composite kernel serves both. The
record's error is registered for both keys instead. A CompositeImplicitAutograd op's dense refusal goes
on the device's autograd key, not its backend key: TorchNeuron registers no such op at its backend key
(its test_autograd_chains forbids it, since a backend kernel there takes the op out of autograd), and
every call on device tensors passes the autograd key first, outside torch.inference_mode (which
skips it and runs the composite, as TorchNeuron does).
"""
import torch

SPARSE_KEY = "SparseCsrPrivateUse1"
# the key a dense refusal goes on, by the kind of composite kernel the op has
DENSE_KEYS = {"CompositeImplicitAutograd": "AutogradPrivateUse1", "CompositeExplicitAutograd": "PrivateUse1"}

_library = None


def _refusal(name: str, message: str):
    def refuse(*args, **kwargs):
        raise NotImplementedError(f"{name}: {message}")
    return refuse


def _dense_key(qualified: str) -> str | None:
    """The key the op's refusal goes on, or None when the op is not a composite or the device has a kernel for it."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    try:
        if has(qualified, "PrivateUse1"):
            return None
        return next((key for composite, key in DENSE_KEYS.items() if has(qualified, composite)), None)
    except RuntimeError:  # TorchScript-only overloads are not dispatcher ops
        return None


def register_refusals(unsupported: dict) -> None:
    """unsupported: "aten::name" -> the error (op_records.UNSUPPORTED), for every overload of the op."""
    global _library
    if _library is not None:
        return
    _library = torch.library.Library("aten", "IMPL")
    for qualified in torch._C._dispatch_get_all_op_names():
        name = qualified.partition(".")[0]
        key = _dense_key(qualified) if name in unsupported else None
        if key is not None:
            refuse = _refusal(name, unsupported[name])
            for each in (key, SPARSE_KEY):
                _library.impl(qualified.removeprefix("aten::"), refuse, each)
