"""Composite ops the device runs whole instead of through PyTorch's decomposition.

Two kinds: every structured op (PyTorch would allocate its output on the device and then run the
out= variant; running it whole is one executable instead of two dispatches, and avoids out=
resizes), and the composite ops whose records (op_records.py) say run=WHOLE, because TorchNeuron
implements them as single ops or their composite code touches the tensors' bytes, or
WHOLE_INCLUDING_OUT, because TorchNeuron registers their out= overloads too (full, ones, stack: an out= call is
one op, not its composite's parts) or their composite code checks the device type; and the CUDA-only ops whose
records say on_host(fn), which have no kernel for the device to decompose but run as one executable whose
kernel is fn (ops/policy.py). A structured op's in-place form whose record says run=OUT_KERNEL (tril_, triu_) is
not run whole: its structured kernel runs the out= overload into its argument, the kernel TorchNeuron runs for it.
Factory and copy ops are otherwise left to their decompositions: their
results may belong to the host. A factory run whole that takes its shape from a tensor (ones_like) runs its
composite kernel when the call names a device (names_a_device): the executor would place the result on the
tensor's device, where the device named may be the host or another NeuronCore. A
CompositeImplicitAutograd op run whole without an autograd kernel of its own (index_select_backward) would lose its
gradient: PyTorch's autograd fallback lets the backward pass through it silently drop that path. Such an op runs its
decomposition when its gradient is recorded (grad mode on, an input requiring grad, a floating-point result: a
double backward), and whole otherwise (record_gradient_through_decomposition): isfinite of a tensor that requires
grad stays one op.
"""
import torch

from localneuron import _C
from localneuron.ops.arguments import bind, neuron_tensors, per_schema
from localneuron.ops.op_records import OUT_KERNEL, RUN_ON_HOST, WHOLE, WHOLE_INCLUDING_OUT, WHOLE_OPS, record

STRUCTURED_KEY = "CompositeExplicitAutogradNonFunctional"


def route_whole_ops() -> None:
    for qualified in torch._C._dispatch_get_registrations_for_dispatch_key(STRUCTURED_KEY):
        r = record(*qualified.partition(".")[::2])
        if r is not None and r.run == OUT_KERNEL:
            continue  # its structured kernel runs the out= overload, the kernel TorchNeuron runs for it
        if not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1"):
            _C.route_whole(qualified.split("::")[1])
    for qualified in torch._C._dispatch_get_all_op_names():
        name, _, overload = qualified.partition(".")
        r = record(name, overload)
        run = r.run if r is not None else None
        whole = run == WHOLE_INCLUDING_OUT or (run == WHOLE and not overload.endswith("out"))
        if whole and _decomposes_on_device(qualified):
            _C.route_whole(qualified.split("::")[1])
            if _loses_its_gradient(qualified):
                record_gradient_through_decomposition(qualified)
    for qualified in RUN_ON_HOST:
        _C.route_whole(qualified.split("::")[1])


_autograd_library = None


def record_gradient_through_decomposition(qualified: str) -> None:
    """The op's autograd kernel on the device: its decomposition while a gradient is recorded, else the op whole."""
    global _autograd_library
    if _autograd_library is None:
        _autograd_library = torch.library.Library("aten", "IMPL")
    name, _, overload = qualified.removeprefix("aten::").partition(".")
    op = getattr(getattr(torch.ops.aten, name), overload or "default")

    def autograd_kernel(*args, **kwargs):
        with torch._C._AutoDispatchBelowAutograd():
            results = op(*args, **kwargs)
        if not (torch.is_grad_enabled() and any(t.requires_grad for t in neuron_tensors(args, kwargs))):
            return results
        # a gradient is being recorded: only results that can carry one (floating point; isfinite's and one_hot's
        # cannot) need the decomposition's graph, so those ops stay one op
        if not any(r.is_floating_point() or r.is_complex() for r in _tensors_of(results)):
            return results
        return op.decompose(*args, **kwargs)
    _autograd_library.impl(qualified.removeprefix("aten::"), autograd_kernel, "AutogradPrivateUse1")


def _tensors_of(results) -> list:
    return [r for r in (results if isinstance(results, (tuple, list)) else (results,)) if isinstance(r, torch.Tensor)]


def _loses_its_gradient(qualified: str) -> bool:
    """A composite with no autograd kernel, neither PyTorch's nor the device's own (linear's: csrc/aten/linear.cpp)."""
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return (has(qualified, "CompositeImplicitAutograd") and not has(qualified, "Autograd")
            and not has(qualified, "AutogradPrivateUse1"))


def _decomposes_on_device(qualified: str) -> bool:
    try:
        composite = any(torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key)
                        for key in ("CompositeExplicitAutograd", "CompositeImplicitAutograd"))
        return composite and not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1")
    except RuntimeError:  # TorchScript-only overloads (add.t, ...) are not dispatcher ops
        return False


def names_a_device(op, args, kwargs) -> bool:
    """A call of a factory run whole that takes a tensor and is given a device: the executor places its results on
    the tensor's device, so it runs the op's composite kernel instead (composite_kernel), which honours the
    device. The executor's signature holds the device's type, not its index: every such call is decided alike."""
    return _takes_a_tensor_and_a_device(op._schema) and bind(op._schema, args, kwargs).get("device") is not None


def composite_kernel(op, args, kwargs):
    return op.redispatch(COMPOSITE_KEYSET, *args, **kwargs)


COMPOSITE_KEYSET = torch._C.DispatchKeySet(torch._C.DispatchKey.CompositeExplicitAutograd)


@per_schema
def _takes_a_tensor_and_a_device(schema) -> bool:
    return (schema.name in WHOLE_OPS and any(a.name == "device" for a in schema.arguments)
            and any(isinstance(a.type, torch.TensorType) for a in schema.arguments))
