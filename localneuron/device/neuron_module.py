"""torch.neuron: the device module PyTorch looks up for the `neuron` device (mirrors torch.cuda)."""
import torch

from localneuron import _C

from localneuron.compiler.metrics import get_dynamo_metrics, reset_dynamo_metrics  # noqa: F401
from localneuron.device import memory
from localneuron.device.devices import (
    _index, current_device, device, device_count, get_device_name, get_device_properties, init, is_available,
    is_initialized, synchronize,
)
from localneuron.device.memory import (
    empty_cache, host_memory_stats, host_memory_stats_as_nested_dict, max_memory_allocated, max_memory_reserved,
    mem_get_info, memory_allocated, memory_reserved,
    memory_stats, memory_summary, reset_accumulated_host_memory_stats, reset_accumulated_memory_stats,
    reset_peak_host_memory_stats, reset_peak_memory_stats,
)
from localneuron.device.random import (
    get_rng_state, get_rng_state_all, initial_seed, manual_seed, manual_seed_all, seed, seed_all, set_rng_state,
    set_rng_state_all,
)
from localneuron.device.streams import (
    Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream,
)


def set_device(device) -> None:
    """Hands the index to torch_neuronx.set_device, looked up at each call (None: the current device), as
    TorchNeuron's torch.neuron.set_device does: its tests replace that function and watch the call."""
    import torch_neuronx  # at call time: torch_neuronx imports this module
    torch_neuronx.set_device(current_device() if device is None else _index(device))


def get_amp_supported_dtype() -> list[torch.dtype]:
    return [torch.float32, torch.float16, torch.bfloat16]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def wait_stream(s) -> None:
    current_stream().wait_stream(s)


def wait_event(e) -> None:
    e.wait(current_stream())


def record_event(e=None):
    return current_stream().record_event(e)


def query() -> bool:
    return current_stream().query()


def _is_in_bad_fork() -> bool:
    return _in_bad_fork


CLOCK_HZ = 1.4e9  # NeuronCore clock for torch.neuron._sleep's cycles


def _sleep(cycles: int) -> None:
    """Keeps the current stream busy for `cycles` clock cycles (PyTorch's test helpers use it, like
    torch.cuda._sleep, to hold a queue)."""
    _C.enqueue_busy_period(_C.current_device(), cycles / CLOCK_HZ)


_in_bad_fork = False


def _mark_forked_child() -> None:
    global _in_bad_fork
    _in_bad_fork = is_initialized()
    _C.mark_forked_child()


__all__ = [
    "Event", "Stream", "StreamContext", "current_device", "current_stream", "default_stream", "device",
    "device_count", "empty_cache", "get_amp_supported_dtype", "get_device_name", "get_device_properties",
    "get_rng_state", "get_rng_state_all", "host_memory_stats", "host_memory_stats_as_nested_dict", "init",
    "initial_seed", "is_available", "is_bf16_supported",
    "is_initialized", "manual_seed", "manual_seed_all", "max_memory_allocated", "max_memory_reserved",
    "mem_get_info", "memory", "memory_allocated", "memory_reserved", "memory_stats", "memory_summary",
    "query", "record_event", "reset_accumulated_host_memory_stats", "reset_accumulated_memory_stats",
    "reset_peak_host_memory_stats", "reset_peak_memory_stats", "seed", "seed_all",
    "set_device", "set_rng_state", "set_rng_state_all", "set_stream", "stream", "synchronize", "wait_event",
    "wait_stream",
]
