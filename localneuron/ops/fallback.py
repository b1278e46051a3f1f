"""CPU fallback, as TorchNeuron does it: copy the inputs to the host, run the host kernel, copy the
results back to the device (in-place and out= arguments are written back into the device tensors
they came from, so views and strides are kept)."""
import torch

from localneuron import _C
from localneuron.ops import arguments


def _to_host(x):
    if isinstance(x, torch.Tensor) and x.device.type == "neuron":
        return x.cpu()
    if isinstance(x, torch.device) and x.type == "neuron":
        return torch.device("cpu")
    if isinstance(x, torch.Generator) and x.device.type == "neuron":
        return _C.host_twin(x)
    return x


def run_on_host(op, args, kwargs, kernel=None):
    """`kernel(*host_args, **host_kwargs)` replaces the op's host kernel when given."""
    schema = op._schema
    device = arguments.output_device(args, kwargs)
    host_args = arguments.tree_map(_to_host, args)
    host_kwargs = arguments.tree_map(_to_host, kwargs)
    for name in arguments.generator_argument_names(schema):
        if host_kwargs.get(name, 0) is None:
            host_kwargs[name] = _C.host_generator(device.index)
    result = (kernel or op)(*host_args, **host_kwargs)

    originals = arguments.bind(schema, args, kwargs)
    hosts = arguments.bind(schema, host_args, host_kwargs)
    written_back = {}
    for name in arguments.mutated_argument_names(schema):
        _write_back(originals[name], hosts[name], written_back)

    def to_device(t: torch.Tensor) -> torch.Tensor:
        original = written_back.get(id(t))
        return original if original is not None else t.to(device)

    return arguments.map_tensors(to_device, result)


def _write_back(original, host, written_back: dict) -> None:
    if isinstance(original, torch.Tensor):
        if original.shape != host.shape:
            original.resize_(host.shape)
        original.copy_(host)
        written_back[id(host)] = original
    elif isinstance(original, (list, tuple)):
        for o, h in zip(original, host):
            _write_back(o, h, written_back)
