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


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x):
        return x + self.down(torch.relu(self.up(x)))


class ParallelMLP(nn.Module):
    """Blocks written for tensor parallelism (the widths come from the weights), declaring which Linear
    layers are column- and row-parallel."""
    tp_plan = {"blocks.*.up": "colwise", "blocks.*.down": "rowwise"}

    def __init__(self, width=256, layers=4):
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(layers))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def parallel_mlp():
    return ParallelMLP(), (torch.randn(8, 64, 256),)


def tiny_llama():
    """A small transformers Llama with its cache: a decode the device runs for real."""
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=512)
    return transformers.LlamaForCausalLM(config), (torch.randint(0, 512, (4, 512)),)


class OneLayer(nn.Module):
    """One transformer block: norm, fused QKV projection, softmax attention written out (its reshapes copy),
    residual, norm, MLP. `llama` picks RMSNorm and SiLU (RMSNorm converts bf16 to fp32 and back) over
    LayerNorm and GELU."""

    def __init__(self, width=256, heads=4, llama=False):
        super().__init__()
        self.heads = heads
        norm = nn.RMSNorm if llama else nn.LayerNorm
        self.norm1, self.norm2 = norm(width), norm(width)
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)
        self.act = nn.SiLU() if llama else nn.GELU()

    def forward(self, x):
        b, s, w = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.heads, w // self.heads).permute(2, 0, 3, 1, 4)
        attention = (q @ k.transpose(-1, -2) / (w // self.heads) ** 0.5).softmax(-1)
        x = x + self.out((attention @ v).transpose(1, 2).reshape(b, s, w))
        return x + self.down(self.act(self.up(self.norm2(x))))


def one_layer():
    torch.manual_seed(0)
    return OneLayer(), (torch.randn(4, 128, 256),)


def one_llama_layer():
    torch.manual_seed(0)
    return OneLayer(llama=True), (torch.randn(4, 128, 256),)
