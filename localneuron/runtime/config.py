"""The simulated device as the environment shapes it: target, visible cores, capacity.

The variables are parsed and validated by runtime/environment.py; here they are checked against
each other (visible cores against the instance the target and chip count make).
"""
from dataclasses import dataclass

from localneuron.runtime.environment import MAX_CHIPS, ConfigurationError, given, read
from localneuron.runtime.targets import TARGETS, Target

__all__ = ["ConfigurationError", "DeviceConfig", "device_config", "selected_target"]


@dataclass(frozen=True)
class DeviceConfig:
    target: Target
    visible_cores: tuple[int, ...]
    hbm_bytes_per_core: int


def selected_target() -> Target:
    return TARGETS[read("LOCALNEURON_TARGET")]


def device_config() -> DeviceConfig:
    target = selected_target()
    chips = read("LOCALNEURON_CHIPS")
    if chips is None:  # under torchrun the instance has at least as many cores as ranks per node
        ranks_per_node = read("LOCAL_WORLD_SIZE") or 1
        chips = -(-ranks_per_node // target.logical_cores)
        if chips > MAX_CHIPS:
            raise ConfigurationError(
                f"LOCAL_WORLD_SIZE={ranks_per_node} ranks on one host need {chips} chips; the simulated instance "
                f"has at most {MAX_CHIPS} ({MAX_CHIPS * target.logical_cores} NeuronCores).")
    available = target.logical_cores * chips
    visible = read("NEURON_RT_VISIBLE_CORES")
    if visible is None:
        visible = tuple(range(available))
    beyond = [c for c in visible if c >= available]
    if beyond:
        raise ConfigurationError(
            f"NEURON_RT_VISIBLE_CORES={given('NEURON_RT_VISIBLE_CORES')!r} names core {beyond[0]}, but the simulated instance has {available} logical "
            f"NeuronCores (0-{available - 1}); raise LOCALNEURON_CHIPS for more.")
    hbm = read("LOCALNEURON_HBM_BYTES_PER_CORE") or target.hbm_bytes_per_core
    return DeviceConfig(target=target, visible_cores=visible, hbm_bytes_per_core=hbm)
