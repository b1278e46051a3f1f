"""The simulated device as the environment shapes it: target, visible cores, capacity.

The variables are parsed and validated by runtime/environment.py; here they are checked against
each other (visible cores against the instance the target and chip count make).
"""
import functools
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
    """The simulated chip with its logical cores as NEURON_LOGICAL_NC_CONFIG groups them (the target's default LNC
    when unset): the device count, HBM per core and every price follow it."""
    return _at_lnc(read("LOCALNEURON_TARGET"), read("NEURON_LOGICAL_NC_CONFIG"))


@functools.cache
def _at_lnc(name: str, lnc: int | None) -> Target:
    target = TARGETS[name]
    try:
        return target if lnc is None else target.at_lnc(lnc)
    except ValueError as error:
        raise ConfigurationError(f"NEURON_LOGICAL_NC_CONFIG={lnc}: {error}") from None


def device_config() -> DeviceConfig:
    target = selected_target()
    per_chip = f"{target.logical_cores} logical NeuronCores a chip at LNC={target.lnc}"
    chips = read("LOCALNEURON_CHIPS")
    if chips is None:  # under torchrun the instance has at least as many cores as ranks per node
        ranks_per_node = read("LOCAL_WORLD_SIZE") or 1
        chips = -(-ranks_per_node // target.logical_cores)
        if chips > MAX_CHIPS:
            raise ConfigurationError(
                f"LOCAL_WORLD_SIZE={ranks_per_node} ranks on one host need {chips} chips ({per_chip}); the simulated "
                f"instance has at most {MAX_CHIPS} ({MAX_CHIPS * target.logical_cores} NeuronCores).")
    available = target.logical_cores * chips
    visible, wanted = read("NEURON_RT_VISIBLE_CORES"), read("NEURON_RT_NUM_CORES") or available
    if visible is None:
        # the runtime reserves the first free cores; a simulated instance has no other process holding any
        if wanted > available:
            raise ConfigurationError(
                f"NEURON_RT_NUM_CORES={wanted} asks for more NeuronCores than the simulated instance has: {available} "
                f"({chips} chip(s), {per_chip}); ask for fewer, or raise LOCALNEURON_CHIPS.")
        visible = tuple(range(wanted))
    beyond = [c for c in visible if c >= available]
    if beyond:
        raise ConfigurationError(
            f"NEURON_RT_VISIBLE_CORES={given('NEURON_RT_VISIBLE_CORES')!r} names core {beyond[0]}, but the simulated "
            f"instance has {available} logical NeuronCores (0-{available - 1}; {chips} chip(s), {per_chip}); raise "
            "LOCALNEURON_CHIPS for more.")
    hbm = read("LOCALNEURON_HBM_BYTES_PER_CORE") or target.hbm_bytes_per_core
    return DeviceConfig(target=target, visible_cores=visible, hbm_bytes_per_core=hbm)
