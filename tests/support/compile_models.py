"""Small models and the shared compile-cache fixture for the torch.compile(backend="neuron") tests.

The models are tiny so that a cold compile stays short; every test module shares one temporary
TORCH_NEURONX_NEFF_CACHE_DIR, so a graph that several tests compile is generated only once. scripts/test.sh gives
both of its passes and their workers one such directory (LOCALNEURON_TEST_COMPILE_CACHE, made for the run and removed
after it), so a graph is generated once per run; the cache's own behaviour is tested with caches of the tests' own
(compile/test_compile_cache*.py).
"""
import os
import pathlib

import pytest
import torch
import torch.nn as nn

SHARED_BY_THE_RUN = "LOCALNEURON_TEST_COMPILE_CACHE"


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory):
    shared = os.environ.get(SHARED_BY_THE_RUN)
    with pytest.MonkeyPatch.context() as mp:
        directory = pathlib.Path(shared) / "neff_cache" if shared else tmp_path_factory.mktemp("neff_cache")
        locks = pathlib.Path(shared) / "neff_locks" if shared else tmp_path_factory.mktemp("neff_locks")
        for made in (directory, locks):
            made.mkdir(mode=0o700, exist_ok=True)
        mp.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(directory))
        mp.setenv("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", str(locks))
        yield directory


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 4))


class TinyTransformer(nn.Module):
    def __init__(self, vocab: int = 32, dim: int = 16, heads: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim)
        self.block = nn.TransformerEncoderLayer(dim, heads, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.head = nn.Linear(dim, vocab)

    def forward(self, tokens):
        return self.head(self.block(self.embed(tokens)))


class ConvBN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc(torch.relu(self.bn(self.conv(x))).mean((2, 3)))
