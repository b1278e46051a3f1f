"""CPU fallback, as TorchNeuron does it: copy the inputs to the host, run the host kernel, copy the
results back to the device (in-place and out= arguments are written back into the device tensors
they came from, so views and strides are kept). Arguments that share a device storage (an out= that is
also an input, or overlaps one) get host copies that share one host storage, so the host kernel sees
the aliasing it would see on the CPU (and refuses what the CPU refuses).

Every call of a fallback op comes through here: one plain pass over its arguments, schema facts cached."""
import torch

from localneuron.ops import arguments


class _HostCopies:
    """Host copies of one call's arguments, remembering which neuron device the results go to."""

    def __init__(self, shared_storages: set):
        self.tensor_device = None  # of the first neuron tensor, in argument order
        self.named_device = None  # the first neuron torch.device argument
        self.shared_storages = shared_storages  # data pointers of device storages several arguments use
        self.host_storages: dict = {}  # data pointer -> the host copy of that whole storage
        self.copies: dict = {}  # id of a device tensor -> its host copy (the same tensor twice: one copy)

    def of(self, x):
        if isinstance(x, torch.Tensor):
            device = x.device
            if device.type != "neuron":
                return x
            if self.tensor_device is None:
                self.tensor_device = device
            if id(x) in self.copies:
                return self.copies[id(x)]
            storage = x.untyped_storage()
            if storage.data_ptr() not in self.shared_storages:
                copy = x.cpu()
            else:
                if storage.data_ptr() not in self.host_storages:
                    self.host_storages[storage.data_ptr()] = storage.cpu()
                copy = torch.empty(0, dtype=x.dtype).set_(self.host_storages[storage.data_ptr()], x.storage_offset(),
                                                          x.size(), x.stride())
            self.copies[id(x)] = copy
            return copy
        if isinstance(x, torch.device) and x.type == "neuron":
            if self.named_device is None:
                self.named_device = x
            return torch.device("cpu")
        return x  # a generator too: the host kernel draws from it, or from the CPU's default (device/random.py)

    def output_device(self) -> torch.device:
        if self.tensor_device is not None:
            return self.tensor_device
        index = self.named_device.index if self.named_device is not None else None
        return torch.device("neuron", index if index is not None else torch.neuron.current_device())


def _shared_storages(args, kwargs) -> set:
    seen, shared = set(), set()
    for t in arguments.neuron_tensors(args, kwargs):
        if t.untyped_storage().nbytes() == 0:
            continue
        key = t.untyped_storage().data_ptr()
        (shared if key in seen else seen).add(key)
    return shared


def run_on_host(op, args, kwargs, kernel=None):
    """`kernel(*host_args, **host_kwargs)` replaces the op's host kernel when given."""
    schema = op._schema
    copies = _HostCopies(_shared_storages(args, kwargs))
    host_args, host_kwargs = arguments.map_arguments(copies.of, args, kwargs)
    device = copies.output_device()
    result = (kernel or op)(*host_args, **host_kwargs)

    written_back = {}
    for original, host in arguments.written_arguments(schema, (args, kwargs), (host_args, host_kwargs)):
        _write_back(original, host, written_back)

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
