"""Where a compiled graph's inputs and outputs live (docs/support-matrix.md#torchcompile).

CPU tensor inputs are copied to the device when the graph runs (TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY=1
makes them an error), so a graph traced on CPU tensors is compiled for their device copies: its
FakeTensor inputs and its CPU device constants move to neuron. Outputs stay on neuron unless
TORCH_NEURONX_RETAIN_DEVICE_MODE=1 sends them back to the inputs' device.
"""
import torch
from torch._guards import detect_fake_mode
from torch._subclasses.fake_tensor import FakeTensor
from torch.fx.node import map_aggregate

from localneuron.compiler import errors
from localneuron.compiler.settings import CompileSettings


def _is_cpu_tensor(x) -> bool:
    """A CPU tensor input to copy; 0-dim CPU tensors are scalars that device ops accept as they are (and
    the optimizers' `step` counters among them must be updated in place, not in a copy)."""
    return isinstance(x, torch.Tensor) and x.device.type == "cpu" and x.dim() > 0


def _input_devices(example_inputs):
    devices = []
    for x in example_inputs:
        if isinstance(x, torch.Tensor) and x.dim() > 0 and x.device not in devices:
            devices.append(x.device)
    return devices


def _to_device_constants(gm: torch.fx.GraphModule, device: torch.device) -> None:
    def move(value):
        return device if isinstance(value, torch.device) and value.type == "cpu" else value

    for node in gm.graph.nodes:
        node.args = map_aggregate(node.args, move)
        node.kwargs = map_aggregate(node.kwargs, move)
    gm.recompile()


def on_device(gm: torch.fx.GraphModule, example_inputs, settings: CompileSettings):
    """(graph, example inputs) to compile, and a wrapper that puts run-time arguments where they belong."""
    devices = _input_devices(example_inputs)
    if settings.retain_device and len(devices) > 1:
        raise errors.mixed_input_devices(*[str(d) for d in devices[:2]])
    cpu_inputs = [i for i, x in enumerate(example_inputs) if _is_cpu_tensor(x)]
    if not cpu_inputs:
        return gm, example_inputs, _unchanged
    if not settings.cpu_autocopy:
        raise errors.cpu_input(cpu_inputs[0])
    device = torch.device("neuron", torch.neuron.current_device())
    # Dynamo hands the backend real tensors for some inputs (parameters); the device copies are FakeTensors.
    fake_mode = detect_fake_mode(example_inputs)
    with fake_mode:
        moved = [_fake(fake_mode, x).detach().to(device).requires_grad_(x.requires_grad) if _is_cpu_tensor(x) else x
                 for x in example_inputs]
    _to_device_constants(gm, device)
    back_to_cpu = settings.retain_device

    def wrap(compiled):
        def run(*args):
            outputs = compiled(*[a.to(device) if _is_cpu_tensor(a) else a for a in args])
            if back_to_cpu:
                outputs = type(outputs)(o.cpu() if isinstance(o, torch.Tensor) else o for o in outputs)
            return outputs

        return run

    return gm, moved, wrap


def _fake(fake_mode, x: torch.Tensor) -> torch.Tensor:
    return x if isinstance(x, FakeTensor) else fake_mode.from_tensor(x)


def _unchanged(compiled):
    return compiled
