"""Train a small GPT-style transformer on synthetic token data.

Runs unchanged on any device: `python examples/train_gpt.py --device neuron` (or cpu). Under
`localneuron run` it ends with the portability report of what the run would do on Trainium.
"""
import argparse
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 256, context: int = 64, dim: int = 128, heads: int = 4, layers: int = 2):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.positions = nn.Embedding(context, dim)
        self.blocks = nn.Sequential(*[Block(dim, heads) for _ in range(layers)])
        self.ln = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        positions = torch.arange(idx.shape[1], device=idx.device)
        x = self.tokens(idx) + self.positions(positions)
        return self.head(self.ln(self.blocks(x)))


def synthetic_batches(steps: int, batch: int, context: int, vocab: int, seed: int = 0):
    """A learnable sequence task (each token predicts the next of a noisy arithmetic progression)."""
    g = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        start = torch.randint(0, vocab, (batch, 1), generator=g)
        stride = torch.randint(1, 4, (batch, 1), generator=g)
        seq = (start + stride * torch.arange(context + 1)) % vocab
        yield seq[:, :-1], seq[:, 1:]


def train(device: str, steps: int = 20, batch: int = 8, seed: int = 0, log=print):
    torch.manual_seed(seed)
    model = GPT()
    model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    losses = []
    for step, (x, y) in enumerate(synthetic_batches(steps, batch, 64, 256, seed)):
        x, y = x.to(device), y.to(device)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        log(f"step {step:3d}  loss {losses[-1]:.4f}")
    return model, losses


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--device", default="neuron")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    _, losses = train(args.device, args.steps, args.batch)
    print(f"final loss {losses[-1]:.4f} (random guessing: {math.log(256):.4f})")


if __name__ == "__main__":
    main()
