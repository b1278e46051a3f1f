"""Model factories for `localneuron estimate --model-fn` in the tests (also run for real on the device)."""
import torch
from torch import nn


class TinyTransformer(nn.Module):
    def __init__(self, vocab=256, width=128, layers=2):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, 4, 4 * width, dropout=0.0, batch_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, ids):
        return self.head(self.blocks(self.embed(ids)))


def tiny_transformer():
    torch.manual_seed(0)
    return TinyTransformer(), (torch.randint(0, 256, (8, 64)),)


class Orthogonalise(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(16, 16)

    def forward(self, x):
        q, _ = torch.linalg.qr(self.linear(x))
        return q


def with_a_fallback():
    return Orthogonalise(), (torch.randn(16, 16),)
