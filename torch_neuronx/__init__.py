"""torch_neuronx: TorchNeuron's public Python API, served by localneuron's simulated device.

Names follow TorchNeuron 2.33 (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/api/index.html);
each comes from the localneuron layer that implements it.
"""
import sys

import localneuron  # noqa: F401  (registers the device when autoload is disabled)
from localneuron.device.devices import (  # noqa: F401
    current_device, device, device_count, get_device_properties, synchronize,
)
from localneuron.device.devices import is_initialized as is_neuron_runtime_initialized  # noqa: F401
from localneuron.device.devices import set_device  # noqa: F401
from localneuron.device.memory import (  # noqa: F401
    empty_cache, max_memory_allocated, max_memory_reserved, memory_allocated, memory_reserved, memory_stats,
    memory_summary, reset_accumulated_memory_stats, reset_peak_memory_stats,
)
from localneuron.device.streams import (  # noqa: F401
    Event, Stream, StreamContext, current_stream, default_stream, set_stream, stream,
)
from localneuron.compiler.metrics import get_dynamo_metrics, reset_dynamo_metrics  # noqa: F401
from localneuron.ops.tracking import clear_op_tracking, get_executed_ops, get_fallback_ops  # noqa: F401
from localneuron import distributed  # noqa: F401,E402  (torch_neuronx.distributed: the c10d backend "neuron")
from torch_neuronx import memory  # noqa: F401,E402
from torch_neuronx import metrics  # noqa: F401,E402
from localneuron.device import neuron_module as neuron  # noqa: E402
sys.modules[f"{__name__}.neuron"] = neuron  # torch_neuronx.neuron is torch.neuron: one module, as in TorchNeuron
from torch_neuronx import profiling  # noqa: F401,E402
from torch_neuronx import utils  # noqa: F401,E402  (the configuration questions TorchNeuron's tests ask)
from torch_neuronx.profiling import NeuronProfiler  # noqa: F401,E402  (TorchNeuron's top-level name)


# the NKI simulator (with torch._dynamo, about a second of start-up) loads when a kernel is first wrapped
_NKI_NAMES = ("nki_op", "wrap_nki")


def __getattr__(name: str):
    if name in _NKI_NAMES:
        from localneuron import nki
        return getattr(nki, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted([*globals(), *_NKI_NAMES])
