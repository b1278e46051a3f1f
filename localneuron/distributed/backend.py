"""Registers `neuron` with c10d, as TorchNeuron does (docs/support-matrix.md#distributed): after this,
`dist.init_process_group("neuron")`, composite strings like "cpu:gloo,neuron:neuron", `new_group` and
`init_device_mesh("neuron", ...)` all create a ProcessGroupNeuron."""
from datetime import timedelta

import torch.distributed as dist

from localneuron.distributed import rank_device, report
from localneuron.distributed.process_group import ProcessGroupNeuron


def _create(store: dist.Store, rank: int, size: int, timeout: timedelta) -> ProcessGroupNeuron:
    # The world group is created before c10d counts as initialized; subgroups come after it.
    is_world = not dist.is_initialized()
    if is_world:
        rank_device.attach(store, rank, size)
        report.write_at_exit(rank, size)
    return ProcessGroupNeuron(store, rank, size, timeout, is_world)


def register() -> None:
    if dist.is_available() and "neuron" not in dist.Backend.backend_list:
        dist.Backend.register_backend("neuron", _create, devices=["neuron"])
