"""The same random draws on both devices: record what a model samples in a CPU run, replay it on `neuron`.

Why a sweep comparing devices needs it: a draw on `neuron` takes the CPU generator's values
(localneuron/device/random.py), so seeding alike gives both runs the same samples only while they make the same
draws in the same order; a device path that samples in another order or shape (a different kernel choice, an
extra draw) would turn the comparison into one of samples. Replaying keeps it a comparison of computations.

Replaying still runs every sampling op on the device (its CPU fallback and generator are exercised and
observed as in the user's run); only the values drawn are then overwritten with the CPU's, in order.
"""
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

# Ops whose outputs are samples and nothing else. Not every op tagged nondeterministic_seeded: attention and
# RNN kernels carry the tag for their dropout, and their outputs are computations the comparison must see.
SAMPLING_OPS = frozenset({
    "bernoulli", "bernoulli_",
    "cauchy", "cauchy_",
    "exponential", "exponential_",
    "geometric", "geometric_",
    "log_normal", "log_normal_",
    "multinomial",
    "normal", "normal_",
    "poisson",
    "_standard_gamma",
    "rand", "rand_like",
    "randint", "randint_like",
    "randn", "randn_like",
    "randperm",
    "uniform", "uniform_",
})


class RandomDrawMismatch(RuntimeError):
    """The device run sampled in a different order or shape than the CPU run it replays."""


def _is_sampling(func) -> bool:
    return func.overloadpacket.__name__ in SAMPLING_OPS


def _sampled_tensors(output) -> list[torch.Tensor]:
    return [t for t in tree_leaves(output) if isinstance(t, torch.Tensor)]


def _describe(name: str, tensors) -> str:
    return f"{name} -> {[(tuple(t.shape), str(t.dtype).removeprefix('torch.')) for t in tensors]}"


class RecordDraws(TorchDispatchMode):
    """Keeps a CPU copy of every sample drawn while active (`draws`: [(op, [tensors])] in call order)."""

    def __init__(self):
        super().__init__()
        self.draws: list[tuple[str, list[torch.Tensor]]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        output = func(*args, **(kwargs or {}))
        if _is_sampling(func):
            self.draws.append((str(func), [t.detach().cpu().clone() for t in _sampled_tensors(output)]))
        return output


class ReplayDraws(TorchDispatchMode):
    """Runs each sampling op, then overwrites its samples with the recorded ones; raises RandomDrawMismatch
    when the ops or shapes differ from the recording (a difference the comparison must report, not absorb)."""

    def __init__(self, draws: list[tuple[str, list[torch.Tensor]]]):
        super().__init__()
        self.draws, self.replayed = draws, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        output = func(*args, **(kwargs or {}))
        if not _is_sampling(func):
            return output
        sampled = _sampled_tensors(output)
        if self.replayed >= len(self.draws):
            raise RandomDrawMismatch(f"random draw {self.replayed}: {_describe(str(func), sampled)} on the device "
                                     f"but the CPU run drew only {len(self.draws)} times")
        name, recorded = self.draws[self.replayed]
        if name != str(func) or [(t.shape, t.dtype) for t in recorded] != [(t.shape, t.dtype) for t in sampled]:
            raise RandomDrawMismatch(f"random draw {self.replayed}: {_describe(str(func), sampled)} on the device, "
                                     f"{_describe(name, recorded)} on the CPU")
        with torch.no_grad():
            for device_tensor, host_tensor in zip(sampled, recorded):
                device_tensor.copy_(host_tensor)
        self.replayed += 1
        return output

    def __exit__(self, exc_type, exc_value, traceback):
        super().__exit__(exc_type, exc_value, traceback)
        if exc_type is None and self.replayed != len(self.draws):
            raise RandomDrawMismatch(f"the device run drew {self.replayed} times, the CPU run {len(self.draws)} times "
                                     f"(first missing: {_describe(*self.draws[self.replayed])})")
