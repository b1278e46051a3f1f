"""`device_map="auto"` on `neuron`: Accelerate sizes devices in `get_max_memory`, which has branches for
CUDA, NPU, XPU, ... but not `neuron`, so the planner would see no accelerator and put the whole model on
the CPU. On `neuron` the integer keys of a device map already mean NeuronCores (`torch.device(0)` is
`neuron:0`), so the only missing piece is the budget: each visible core's free HBM, then the host's RAM.
Placement, balancing across cores and spilling to the CPU then follow Accelerate's own GPU rules."""
import functools

import torch

from . import notes

_HOST_AND_DISK = ("mps", "cpu", "disk")


def _neuron_is_the_accelerator() -> bool:
    accelerator = torch.accelerator.current_accelerator()
    return accelerator is not None and accelerator.type == "neuron"


def _defaults() -> dict:
    import psutil

    budget = {index: torch.neuron.mem_get_info(index)[0] for index in range(torch.neuron.device_count())}
    budget["cpu"] = psutil.virtual_memory().available
    return budget


def _checked(max_memory: dict, to_bytes) -> dict:
    cores = torch.neuron.device_count()
    for key in max_memory:
        if isinstance(key, int) and not 0 <= key < cores:
            raise ValueError(f"max_memory names NeuronCore {key}, but this process sees {cores} NeuronCores "
                             f"(0..{cores - 1}; NEURON_RT_VISIBLE_CORES selects them). Use those indices, "
                             "'cpu' or 'disk'.")
        if not isinstance(key, int) and key not in _HOST_AND_DISK:
            raise ValueError(f"max_memory key {key!r} is not a device Accelerate can plan for on `neuron`: "
                             "use NeuronCore indices (0, 1, ...), 'cpu' or 'disk'.")
    converted = {key: to_bytes(value) if isinstance(value, str) else value for key, value in max_memory.items()}
    ordered = sorted(key for key in converted if isinstance(key, int))
    ordered += [key for key in _HOST_AND_DISK if key in converted]
    return {key: converted[key] for key in ordered}


def _neuron_aware(upstream, to_bytes):
    @functools.wraps(upstream)
    def get_max_memory(max_memory=None):
        if not _neuron_is_the_accelerator():
            return upstream(max_memory)
        notes.record("accelerate_max_memory")
        return _defaults() if max_memory is None else _checked(max_memory, to_bytes)

    get_max_memory.__localneuron_upstream__ = upstream
    return get_max_memory


def patch(utils_package) -> None:
    """Called with `accelerate.utils`; replaces the function where Accelerate and its importers look it up."""
    modeling = utils_package.modeling
    if hasattr(modeling.get_max_memory, "__localneuron_upstream__"):
        return
    replacement = _neuron_aware(modeling.get_max_memory, modeling.convert_file_size_to_int)
    modeling.get_max_memory = replacement
    utils_package.get_max_memory = replacement
