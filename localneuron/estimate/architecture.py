"""A decoder-only transformer's shape, read from a Hugging Face config.json (Llama family and GPT-2
style), checked field by field: the file is input from the user."""
import json
import math
from dataclasses import dataclass
from pathlib import Path

LLAMA_FAMILY = {"llama", "mistral", "qwen2", "qwen3", "granite", "olmo2", "phi3"}
GPT_FAMILY = {"gpt2"}


class ConfigError(ValueError):
    """The config file cannot describe a model the estimate can build."""


@dataclass(frozen=True)
class Architecture:
    model_type: str
    family: str              # "llama" (RMSNorm, RoPE, gated SiLU MLP) or "gpt" (LayerNorm, learned positions, GELU MLP)
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    tied_embeddings: bool
    attention_bias: bool
    mlp_bias: bool
    dropout: float           # residual and attention dropout while training
    positions: int = 0       # learned position embeddings (GPT)

    @property
    def parameters(self) -> int:
        """Parameter count of the whole model (unsharded)."""
        qkv = (self.heads + 2 * self.kv_heads) * self.head_dim
        attention = self.hidden * qkv + self.heads * self.head_dim * self.hidden
        attention += (qkv + self.hidden) if self.attention_bias else 0
        gated = self.family == "llama"
        mlp = (3 if gated else 2) * self.hidden * self.intermediate
        mlp += ((2 if gated else 1) * self.intermediate + self.hidden) if self.mlp_bias else 0
        norm = self.hidden if gated else 2 * self.hidden   # LayerNorm has a bias, RMSNorm does not
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2) + self.positions * self.hidden
        return self.layers * (attention + mlp + 2 * norm) + embeddings + norm

    def flops_per_token(self, context: int) -> float:
        """Forward matmul FLOPs per token with `context` attended tokens (for MFU): 2 per weight,
        plus the attention scores and weighted values."""
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2) + self.positions * self.hidden
        weights = self.parameters - embeddings + self.vocab * self.hidden
        return 2.0 * weights + 4.0 * self.layers * self.heads * self.head_dim * context


def _positive_int(config: dict, *names, default=None) -> int:
    for name in names:
        if name in config and config[name] is not None:
            value = config[name]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"config field {name!r} must be a positive integer, got {value!r}")
            return value
    if default is not None:
        return default
    raise ConfigError(f"config has none of {list(names)}; the estimate needs it to build the model")


def from_config(config: dict) -> Architecture:
    if not isinstance(config, dict):
        raise ConfigError("config.json must hold a JSON object")
    model_type = str(config.get("model_type", "")).lower()
    if model_type in LLAMA_FAMILY:
        hidden = _positive_int(config, "hidden_size")
        heads = _positive_int(config, "num_attention_heads")
        arch = Architecture(
            model_type=model_type, family="llama", hidden=hidden,
            layers=_positive_int(config, "num_hidden_layers"), heads=heads,
            kv_heads=_positive_int(config, "num_key_value_heads", default=heads),
            head_dim=_positive_int(config, "head_dim", default=hidden // heads),
            intermediate=_positive_int(config, "intermediate_size"), vocab=_positive_int(config, "vocab_size"),
            tied_embeddings=bool(config.get("tie_word_embeddings", False)),
            attention_bias=bool(config.get("attention_bias", model_type == "qwen2")),
            mlp_bias=bool(config.get("mlp_bias", False)), dropout=float(config.get("attention_dropout", 0.0) or 0.0))
    elif model_type in GPT_FAMILY:
        hidden = _positive_int(config, "n_embd", "hidden_size")
        heads = _positive_int(config, "n_head", "num_attention_heads")
        arch = Architecture(
            model_type=model_type, family="gpt", hidden=hidden, layers=_positive_int(config, "n_layer", "num_hidden_layers"),
            heads=heads, kv_heads=heads, head_dim=hidden // heads,
            intermediate=_positive_int(config, "n_inner", default=4 * hidden), vocab=_positive_int(config, "vocab_size"),
            tied_embeddings=bool(config.get("tie_word_embeddings", True)), attention_bias=True, mlp_bias=True,
            dropout=float(config.get("resid_pdrop", 0.1) or 0.0),
            positions=_positive_int(config, "n_positions", "max_position_embeddings", default=1024))
    else:
        raise ConfigError(
            f"model_type {model_type!r} is not one the estimate builds itself (Llama family: {sorted(LLAMA_FAMILY)}; "
            f"GPT: {sorted(GPT_FAMILY)}); pass --model-fn module:function for any other PyTorch model")
    if arch.heads % arch.kv_heads:
        raise ConfigError(f"num_attention_heads={arch.heads} is not a multiple of num_key_value_heads={arch.kv_heads}")
    if not 0.0 <= arch.dropout < 1.0:
        raise ConfigError(f"dropout probability {arch.dropout} must be in [0, 1)")
    return arch


def load(path: str) -> tuple[dict, Architecture]:
    config = read(path)
    return config, from_config(config)


def read(path: str) -> dict:
    """A config.json as a JSON object, with a clear error for a missing or broken file."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--hf-config {path}: no such file")
    try:
        config = json.loads(p.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"--hf-config {path} is not valid JSON: {error}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"--hf-config {path} must hold a JSON object")
    return config


def shard(n: int, parts: int) -> int:
    """Per-rank share of n heads/units split over `parts` ranks (padded up when uneven)."""
    return math.ceil(n / parts)
