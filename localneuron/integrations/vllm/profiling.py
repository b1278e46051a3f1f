"""vLLM's `/start_profile` and `/stop_profile` on `neuron`: vLLM's torch profiler with the PrivateUse1
activity, which localneuron's Kineto plugin (localneuron/profiler) fills with the runtime events and the
estimated device timeline of each NeuronCore engine.

vLLM keeps its profiler capabilities in tables keyed by device type with no entry for out-of-tree
devices; this adds `neuron` once, before vLLM's worker validates its profiler configuration.
"""
from vllm.profiler import wrapper

DEVICE = "neuron"
ACTIVITIES = ("CPU", "PrivateUse1")


def register() -> None:
    wrapper._DEFAULT_TORCH_PROFILER_ACTIVITIES.setdefault(DEVICE, ACTIVITIES)
    wrapper._SUPPORTED_TORCH_PROFILER_ACTIVITIES.setdefault(DEVICE, frozenset(ACTIVITIES))
    wrapper._SUPPORTED_PROFILER_KINDS.setdefault(DEVICE, frozenset(("torch",)))
