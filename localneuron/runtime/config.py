"""Reads the environment that shapes the simulated device: target, visible cores, capacity."""
import os
from dataclasses import dataclass

from localneuron.runtime.targets import DEFAULT_TARGET, TARGETS, Target


class ConfigurationError(ValueError):
    """An environment variable has a value localneuron cannot use."""


@dataclass(frozen=True)
class DeviceConfig:
    target: Target
    visible_cores: tuple[int, ...]
    hbm_bytes_per_core: int


def selected_target() -> Target:
    name = os.environ.get("LOCALNEURON_TARGET", DEFAULT_TARGET).strip().lower()
    if name not in TARGETS:
        raise ConfigurationError(
            f"LOCALNEURON_TARGET={name!r} is not a simulated target; choose one of {sorted(TARGETS)}.")
    return TARGETS[name]


def parse_visible_cores(spec: str, available: int) -> tuple[int, ...]:
    """NEURON_RT_VISIBLE_CORES syntax: '3', '0,2' or '0-3' (ranges inclusive)."""
    cores: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                cores.extend(range(lo, hi + 1))
            else:
                cores.append(int(part))
        except ValueError:
            raise ConfigurationError(
                f"NEURON_RT_VISIBLE_CORES={spec!r} is not a list of core ids like '0', '0,1' or '0-3'.") from None
    for c in cores:
        if c < 0 or c >= available:
            raise ConfigurationError(
                f"NEURON_RT_VISIBLE_CORES={spec!r} names core {c}, but the simulated instance has "
                f"{available} logical NeuronCores (0-{available - 1}); raise LOCALNEURON_CHIPS for more.")
    return tuple(dict.fromkeys(cores))


def device_config() -> DeviceConfig:
    target = selected_target()
    # Under torchrun the instance has at least as many cores as ranks per node.
    ranks_per_node = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    chips = int(os.environ.get("LOCALNEURON_CHIPS", str(max(1, -(-ranks_per_node // target.logical_cores)))))
    if chips < 1:
        raise ConfigurationError(f"LOCALNEURON_CHIPS={chips} must be at least 1.")
    available = target.logical_cores * chips
    spec = os.environ.get("NEURON_RT_VISIBLE_CORES")
    visible = parse_visible_cores(spec, available) if spec else tuple(range(available))
    hbm = target.hbm_bytes_per_core
    override = os.environ.get("LOCALNEURON_HBM_BYTES_PER_CORE")
    if override:
        try:
            hbm = int(float(override))
        except ValueError:
            raise ConfigurationError(f"LOCALNEURON_HBM_BYTES_PER_CORE={override!r} is not a byte count.") from None
    return DeviceConfig(target=target, visible_cores=visible, hbm_bytes_per_core=hbm)
