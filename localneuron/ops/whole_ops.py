"""Composite ops the device runs whole instead of through PyTorch's decomposition.

Two kinds: every structured op (PyTorch would allocate its output on the device and then run the
out= variant; running it whole is one executable instead of two dispatches, and avoids out=
resizes), and the composite ops whose records (op_records.py) say run=WHOLE, because TorchNeuron
implements them as single ops or their composite code touches the tensors' bytes, or
WHOLE_INCLUDING_OUT, because their composite code checks the device type; and the CUDA-only ops whose
records say on_host(fn), which have no kernel for the device to decompose but run as one executable whose
kernel is fn (ops/policy.py). Factory and copy ops are otherwise left to their decompositions: their
results may belong to the host. A
CompositeImplicitAutograd op run whole keeps no autograd of its own: only records of ops without a
gradient say so.
"""
import torch

from localneuron import _C
from localneuron.ops.op_records import RUN_ON_HOST, WHOLE, WHOLE_INCLUDING_OUT, record

STRUCTURED_KEY = "CompositeExplicitAutogradNonFunctional"


def route_whole_ops() -> None:
    for qualified in torch._C._dispatch_get_registrations_for_dispatch_key(STRUCTURED_KEY):
        if not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1"):
            _C.route_whole(qualified.split("::")[1])
    for qualified in torch._C._dispatch_get_all_op_names():
        name, _, overload = qualified.partition(".")
        r = record(name, overload)
        run = r.run if r is not None else None
        whole = run == WHOLE_INCLUDING_OUT or (run == WHOLE and not overload.endswith("out"))
        if whole and _decomposes_on_device(qualified):
            _C.route_whole(qualified.split("::")[1])
    for qualified in RUN_ON_HOST:
        _C.route_whole(qualified.split("::")[1])


def _decomposes_on_device(qualified: str) -> bool:
    try:
        composite = any(torch._C._dispatch_has_kernel_for_dispatch_key(qualified, key)
                        for key in ("CompositeExplicitAutograd", "CompositeImplicitAutograd"))
        return composite and not torch._C._dispatch_has_kernel_for_dispatch_key(qualified, "PrivateUse1")
    except RuntimeError:  # TorchScript-only overloads (add.t, ...) are not dispatcher ops
        return False
