"""One NeuronCore per process under c10d (docs/support-matrix.md#distributed).

When the world group of the `neuron` backend is created, the process attaches to its own core:
- the device must not have been touched yet (TorchNeuron's assertion), because touching it fixed the
  core set this process runs on;
- NEURON_RT_VISIBLE_CORES becomes LOCAL_RANK unless the user set it, and it must name exactly one core;
- the device index is LOCAL_RANK: `neuron:<LOCAL_RANK>` (and plain `neuron`, the current device) is the
  rank's core, as on CUDA. The index space spans the node's ranks (device_count() = LOCAL_WORLD_SIZE),
  so `rank % device_count()` and `set_device(LOCAL_RANK)`, which DeviceMesh and user scripts do, name
  the rank's core. Only that index is the rank's core; the simulation does not stop a rank from
  allocating on the other indices (TorchNeuron raises there), so don't.
LOCAL_RANK / LOCAL_WORLD_SIZE come from the launcher (torchrun); without them they are derived through
the store, from the ranks that share this host name.
"""
import socket

from localneuron import _C
from localneuron.runtime.config import device_config
from localneuron.runtime.environment import given, read, set_if_unset

ORDERING_ERROR = "Neuron runtime should not be initialized before the init_process_group."
MULTI_DEVICE_ERROR = "Attempted to have more than one device per process in distributed setup"

_attached_rank: int | None = None  # a process may init, destroy and init again: it keeps its core


def attach(store, rank: int, world_size: int) -> int:
    """Attaches this process to its core and makes it current; returns the device index (LOCAL_RANK)."""
    global _attached_rank
    if _attached_rank is not None:
        _C.set_device(_attached_rank)
        return _attached_rank
    if _C.runtime_initialized():
        raise AssertionError(ORDERING_ERROR)
    local_rank, local_world_size = _local_rank_and_size(store, rank, world_size)
    set_if_unset("NEURON_RT_VISIBLE_CORES", str(local_rank))
    config = device_config()
    if len(config.visible_cores) != 1:
        raise AssertionError(
            f"{MULTI_DEVICE_ERROR}: NEURON_RT_VISIBLE_CORES={given('NEURON_RT_VISIBLE_CORES')!r} names "
            f"{len(config.visible_cores)} cores. Leave it unset (each rank then takes core LOCAL_RANK) or give "
            "each rank one core.")
    _C.configure_devices(max(local_world_size, local_rank + 1), config.hbm_bytes_per_core, config.target.name)
    _C.set_device(local_rank)
    _attached_rank = local_rank
    return local_rank


def _local_rank_and_size(store, rank: int, world_size: int) -> tuple[int, int]:
    local_rank, local_world_size = read("LOCAL_RANK"), read("LOCAL_WORLD_SIZE")
    if local_rank is not None and local_world_size is not None:
        return local_rank, local_world_size
    host = socket.gethostname()
    store.set(f"localneuron/host/{rank}", host)
    hosts = [store.get(f"localneuron/host/{r}").decode() for r in range(world_size)]
    same_host = [r for r, h in enumerate(hosts) if h == host]
    return same_host.index(rank), len(same_host)
