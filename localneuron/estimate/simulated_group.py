"""A simulated process group of N ranks, run from one process: the c10d backend `--script` gives the
user's training script. Nothing crosses a wire and no other rank runs: every collective completes at
once, leaving its outputs as they are (device tensors are fake, so there are no values to exchange;
a host tensor keeps this rank's own values, the answer a rank gets when every rank contributes the
same). The trace (script.py) records and prices each collective where the dispatcher passes it.

PyTorch's FakeProcessGroup and TorchTitan's fake-backend dry run do the same to check memory and
configurations; this one is a Python group so that it answers for `neuron` and host tensors alike,
and keeps the identity c10d asks of a group (names, ranks) for DeviceMesh and new_group.
"""
import torch
import torch.distributed as dist

BACKEND = "localneuron_simulated"
# who hears of each collective called on a simulated group: (kind, outputs, inputs, group, asynchronous)
listeners: list = []


class _Done(dist.Work):
    """A collective that has completed: wait() returns at once, its future holds the outputs."""
    def __init__(self, outputs: list):
        super().__init__()
        self._future = torch.futures.Future()
        self._future.set_result(outputs)

    def wait(self, timeout=None) -> bool:
        return True

    def is_completed(self) -> bool:
        return True

    def get_future(self):
        return self._future


def _fake(tensors) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return any(isinstance(t, FakeTensor) for t in _flat(tensors))


class SimulatedProcessGroup(dist.ProcessGroup):
    """Every collective is heard by the listeners, then completes: a host tensor gets the values it
    would get if every rank held this one's; a fake device tensor has none to get."""
    def __init__(self, rank: int, size: int):
        super().__init__(rank, size)
        self._name, self._desc = "", ""

    def getBackendName(self) -> str:
        return BACKEND

    def setGroupName(self, name: str) -> None:
        self._name = name

    def getGroupName(self) -> str:
        return self._name

    def setGroupDesc(self, desc: str) -> None:
        self._desc = desc

    def getGroupDesc(self) -> str:
        return self._desc

    def _call(self, kind: str, outputs, inputs, opts, fill=None) -> _Done:
        for listener in listeners:
            listener(kind, list(_flat(outputs)), list(_flat(inputs)), self, bool(getattr(opts, "asyncOp", False)))
        if fill is not None and not _fake((outputs, inputs)):
            fill()
        return _Done(list(_flat(outputs)))

    def allreduce(self, tensors, opts=None):
        return self._call("all_reduce", tensors, tensors, opts)

    def allreduce_coalesced(self, tensors, opts=None):
        return self._call("all_reduce", tensors, tensors, opts)

    def reduce(self, tensors, opts=None):
        return self._call("all_reduce", tensors, tensors, opts)

    def broadcast(self, tensors, opts=None):
        return self._call("broadcast", tensors, tensors, opts)

    def allgather(self, output_lists, inputs, opts=None):
        def fill():   # every rank holds what this one does
            for outputs, tensor in zip(output_lists, inputs):
                for out in outputs:
                    out.copy_(tensor)
        return self._call("all_gather", output_lists, inputs, opts, fill)

    def _allgather_base(self, output, input, opts=None):
        def fill():
            if output.numel() == input.numel() * self.size():
                output.view(self.size(), -1).copy_(input.reshape(1, -1).expand(self.size(), -1))
        return self._call("all_gather", [output], [input], opts, fill)

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        def fill():
            for output, input in zip(outputs, inputs):
                if output.numel() == input.numel() * self.size():
                    output.view(self.size(), -1).copy_(input.reshape(1, -1).expand(self.size(), -1))
        return self._call("all_gather", outputs, inputs, opts, fill)

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        return self.allgather(output_lists, inputs, opts)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        def fill():
            for output, inputs in zip(outputs, input_lists):
                output.copy_(inputs[self.rank()])
        return self._call("reduce_scatter", outputs, input_lists, opts, fill)

    def _reduce_scatter_base(self, output, input, opts=None):
        def fill():
            if input.numel() == output.numel() * self.size():
                output.copy_(input.reshape(self.size(), *output.shape)[self.rank()])
        return self._call("reduce_scatter", [output], [input], opts, fill)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        def fill():
            for output, input in zip(outputs, inputs):
                if input.numel() == output.numel() * self.size():
                    output.copy_(input.reshape(self.size(), *output.shape)[self.rank()])
        return self._call("reduce_scatter", outputs, inputs, opts, fill)

    def alltoall(self, outputs, inputs, opts=None):
        def fill():
            for output, input in zip(outputs, inputs):
                output.copy_(input)
        return self._call("all_to_all", outputs, inputs, opts, fill)

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        def fill():
            if output.shape == input.shape:
                output.copy_(input)
        return self._call("all_to_all", [output], [input], opts, fill)

    def gather(self, output_lists, inputs, opts=None):
        return self.allgather(output_lists, inputs, opts)

    def scatter(self, outputs, input_lists, opts=None):
        def fill():
            for output, inputs in zip(outputs, input_lists):
                if inputs:
                    output.copy_(inputs[self.rank()])
        return self._call("all_gather", outputs, input_lists, opts, fill)

    def send(self, tensors, dst, tag=0):
        return self._call("send", tensors, tensors, None)

    def recv(self, tensors, src, tag=0):
        return self._call("recv", tensors, tensors, None)

    def barrier(self, opts=None):
        return self._call("barrier", [], [], opts)

    all_gather_single = _allgather_base
    reduce_scatter_single = _reduce_scatter_base
    all_to_all_single = alltoall_base


def _flat(x):
    if isinstance(x, torch.Tensor):
        yield x
    elif isinstance(x, (list, tuple)):
        for y in x:
            yield from _flat(y)


def _create(store, rank: int, size: int, timeout) -> SimulatedProcessGroup:
    return SimulatedProcessGroup(rank, size)


def install(world: int, rank: int) -> None:
    """Makes this process `rank` of a simulated group of `world` ranks, the default group, before the
    script runs: whatever backend and rendezvous the script then names, init_process_group finds the
    group made (DeviceMesh checks that itself; a direct call returns at once)."""
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if BACKEND not in dist.Backend.backend_list:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", "neuron"])
    if not dist.is_initialized():
        dist.distributed_c10d.init_process_group(BACKEND, store=FakeStore(), rank=rank, world_size=world)

    def init_process_group(*args, **kwargs):
        return None
    dist.init_process_group = dist.distributed_c10d.init_process_group = init_process_group
