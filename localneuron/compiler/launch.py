"""Runs host-compiled code on device tensors: inputs go in as zero-copy CPU aliases, results come back
as neuron tensors that take over the host buffers (no copy either way).

An output that is a view of an input (Inductor returns some inputs or their views unchanged) must
become a view of the device input, not a second owner of its bytes, so outputs are matched to input
storages before adopting.
"""
import torch

from localneuron import _C
from localneuron.compiler import pending_collectives
from localneuron.costmodel.work import DeviceWork
from localneuron.runtime import line_time, trace_events


def launcher(compiled, on_device: tuple[bool, ...], waited: tuple[int, ...], device_index: int, work: DeviceWork):
    """A boxed callable (list of args -> list of outputs) over device tensors for `compiled`, whose every run
    costs `work`; the inputs at positions `waited` are collective results the graph waits on
    (pending_collectives.py)."""

    def run(args: list) -> list:
        line_time.note(work.seconds)
        if trace_events.recording():
            start = trace_events.now_ns()
            outputs = run_untraced(args)
            trace_events.record(work, device_index, start)
            return outputs
        return run_untraced(args)

    def run_untraced(args: list) -> list:
        pending_collectives.wait_for(args, waited)
        inputs = {}
        host_args = []
        for a in args:
            if isinstance(a, torch.Tensor) and a.device.type == "neuron":
                inputs[a.untyped_storage().data_ptr()] = a
                host_args.append(_C.cpu_alias(a))
            else:
                host_args.append(a)
        args.clear()  # boxed convention: the callee may free inputs early
        outputs = compiled(host_args)
        return adopt_outputs(outputs, on_device, inputs, device_index)

    run._boxed_call = True
    return run


def adopt_outputs(outputs, on_device, inputs: dict, device_index: int) -> list:
    adopted = {}  # host storage pointer -> neuron tensor owning it (or the device input it aliases)
    result = []
    for out, device in zip(outputs, on_device):
        if not device or not isinstance(out, torch.Tensor):
            result.append(out)
            continue
        ptr = out.untyped_storage().data_ptr()
        base = inputs.get(ptr) if ptr else None
        if base is None:
            base = adopted.get(ptr) if ptr else None
        if base is None:
            owner = _C.adopt(out, device_index)
            if ptr:
                adopted[ptr] = owner
            result.append(owner)
        else:
            result.append(base.as_strided(out.size(), out.stride(), out.storage_offset()))
    return result
