"""Per-device random generators (torch.neuron.manual_seed, get_rng_state, ...)."""
import torch

from localneuron import _C
from localneuron.device.devices import device_index


def default_generator(device=None) -> torch.Generator:
    return _C.default_generator(device_index(device))


def manual_seed(seed: int) -> None:
    default_generator().manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for index in range(_C.device_count()):
        _C.default_generator(index).manual_seed(int(seed))


def seed() -> None:
    default_generator().seed()


def seed_all() -> None:
    first = default_generator(0).seed() if _C.device_count() else None
    for index in range(1, _C.device_count()):
        _C.default_generator(index).manual_seed(first)


def initial_seed() -> int:
    return default_generator().initial_seed()


def get_rng_state(device=None) -> torch.Tensor:
    return default_generator(device).get_state()


def set_rng_state(state: torch.Tensor, device=None) -> None:
    default_generator(device).set_state(state)


def get_rng_state_all() -> list[torch.Tensor]:
    return [get_rng_state(i) for i in range(_C.device_count())]


def set_rng_state_all(states) -> None:
    for i, state in enumerate(states):
        set_rng_state(state, i)
