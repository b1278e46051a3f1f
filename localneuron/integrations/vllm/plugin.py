"""The `vllm.platform_plugins` entry point: vLLM calls it while choosing a platform.

It must return quickly and never fail: vLLM treats an exception as "not available" but logs it only at
debug level, so a broken install would silently serve on the CPU. Unavailability is therefore decided
here, explicitly, and an invalid switch value raises a message naming the variable.
"""
from localneuron.runtime.environment import read

PLATFORM = "localneuron.integrations.vllm.neuron_platform.NeuronPlatform"


def neuron_platform() -> str | None:
    if not read("LOCALNEURON_VLLM_PLATFORM"):
        return None
    import torch

    # importing this module ran localneuron/__init__.py first, which registers the device even when torch's
    # autoload was turned off
    return PLATFORM if torch.neuron.is_available() and torch.neuron.device_count() > 0 else None
