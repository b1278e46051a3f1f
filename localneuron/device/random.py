"""Random numbers on `neuron`: which generator each draw consumes, and what torch.neuron's RNG functions do.

The rule, as on TorchNeuron (no device RNG; random ops fall back to the CPU):

1. Every random draw on neuron consumes the CPU's default generator (torch.default_generator) exactly as the
   same op on the CPU would: the same values, and the CPU stream advances by as much. That holds for factory
   ops (torch.randn/rand/randint/randperm/normal(..., device="neuron")), the *_like ops, in-place draws
   (normal_, uniform_, bernoulli_, random_, exponential_, ...), native_dropout (and F.dropout, nn.Dropout,
   which call it on neuron), and the same ops inside a torch.compile(backend="neuron") graph (compiled with
   Inductor's fallback_random, so the graph calls the eager kernels in its own order). So torch.manual_seed(s)
   followed by the same draws gives the CPU's values, and a draw on neuron changes what the CPU draws next.
2. A CPU generator passed as generator= is drawn from as on the CPU. torch.Generator(device="neuron") is not
   available (csrc/runtime/generator.cpp says what to use instead).
3. Draws happen in program order whatever NEURON_LAUNCH_BLOCKING says: an op that draws runs when issued
   (ops/queueing.py), and a compiled graph runs on the calling thread.
4. Each device also has a default generator holding a Philox seed and offset (get_rng_state: 16 uint8 bytes,
   the seed then the offset). torch.neuron.manual_seed(s) sets the current device's seed (offset 0),
   manual_seed_all every device's, torch.manual_seed(s) the CPU's and every device's (PyTorch calls
   torch.neuron.manual_seed_all); seed() picks a fresh seed, seed_all one fresh seed for all devices;
   initial_seed() reads the current device's seed; set_rng_state restores a state get_rng_state returned.
   None of them reads or changes the CPU generator, and no draw changes them (rule 1).

Shown by tests/device/test_random.py, and by TorchNeuron's own suite: tests/device/test_rng_state.py (its
xfail: randn on neuron consumes the CPU stream), python_ops/test_native_dropout.py (masks equal to the CPU's
after the same torch.manual_seed), and the *_backward tests drawing randn_like on neuron.
"""
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
