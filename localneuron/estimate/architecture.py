"""A transformer's shape, read from a Hugging Face config.json and checked field by field (the file is
input from the user): decoders of the Llama family (RMSNorm, RoPE, gated MLP; with mixture-of-experts
layers for Mixtral, Qwen-MoE and Llama-4, whose dense and MoE layers may alternate), GPT-2/GPT-3 style
decoders (LayerNorm, learned positions, GELU MLP), and encoders (BERT, ViT). A family the estimate
cannot build is refused with the reason."""
import json
import math
from dataclasses import dataclass
from pathlib import Path

LLAMA_FAMILY = {"llama", "mistral", "qwen2", "qwen3", "granite", "olmo2", "phi3", "mixtral", "qwen2_moe",
                "qwen3_moe", "llama4_text", "llama4"}
GPT_FAMILY = {"gpt2"}
ENCODERS = {"bert", "vit"}
# model types the estimate knows it cannot build, and why (the rest are refused as unknown)
REFUSED = {
    "deepseek_v2": "multi-head latent attention (compressed KV, value head size apart from the query's)",
    "deepseek_v3": "multi-head latent attention (compressed KV, value head size apart from the query's)",
    "mamba": "a state-space model (no attention layers)",
    "mamba2": "a state-space model (no attention layers)",
    "t5": "an encoder-decoder model",
    "bart": "an encoder-decoder model",
}
# the largest size a field may take: larger ones overflow the tensor shapes the estimate builds
LIMIT = 1 << 40


class ConfigError(ValueError):
    """The config file cannot describe a model the estimate can build."""


@dataclass(frozen=True)
class Experts:
    """The mixture-of-experts MLP of a layer: `count` experts of `intermediate` hidden units, `per_token`
    of them chosen per token by a router, plus an always-on shared expert of `shared_intermediate`."""
    count: int
    per_token: int
    intermediate: int
    shared_intermediate: int = 0


@dataclass(frozen=True)
class Architecture:
    model_type: str
    family: str              # "llama" | "gpt" | "bert" | "vit"
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int        # hidden units of a dense MLP
    vocab: int
    tied_embeddings: bool
    attention_bias: bool
    mlp_bias: bool
    dropout: float           # residual and attention dropout while training
    positions: int = 0       # learned position embeddings (GPT, BERT)
    qk_norm: bool = False    # a norm on each head's queries and keys (Qwen3, Llama-4)
    experts: Experts | None = None
    moe_layers: tuple = ()   # indices of the layers whose MLP is the mixture of experts
    image_tokens: int = 0    # ViT: patches of the image plus the class token
    patch_inputs: int = 0    # ViT: pixel values of one patch (channels x patch x patch)

    @property
    def causal(self) -> bool:
        return self.family in ("llama", "gpt")

    @property
    def gated(self) -> bool:
        return self.family == "llama"

    @property
    def kinds(self) -> dict:
        """Kind of layer ("dense" or "moe") -> how many the model has."""
        moe = len(self.moe_layers)
        return {kind: n for kind, n in (("dense", self.layers - moe), ("moe", moe)) if n}

    def _attention_parameters(self) -> int:
        qkv = (self.heads + 2 * self.kv_heads) * self.head_dim
        weights = self.hidden * qkv + self.heads * self.head_dim * self.hidden
        return weights + ((qkv + self.hidden) if self.attention_bias else 0) + (2 * self.head_dim if self.qk_norm else 0)

    def _mlp_parameters(self, intermediate: int) -> int:
        weights = (3 if self.gated else 2) * self.hidden * intermediate
        return weights + (((2 if self.gated else 1) * intermediate + self.hidden) if self.mlp_bias else 0)

    def layer_parameters(self, kind: str, active: bool = False) -> int:
        """One layer's parameters; `active`: those one token uses (the experts it is routed to)."""
        norms = 2 * self.hidden * (1 if self.family == "llama" else 2)   # LayerNorm has a bias, RMSNorm not
        if kind == "dense":
            return self._attention_parameters() + self._mlp_parameters(self.intermediate) + norms
        e = self.experts
        experts = (e.per_token if active else e.count) * self._mlp_parameters(e.intermediate)
        return self._attention_parameters() + experts + self._mlp_parameters(e.shared_intermediate) * bool(
            e.shared_intermediate) + self.hidden * e.count + norms

    def _embedding_parameters(self) -> int:
        return self.vocab * self.hidden + self.positions * self.hidden + self.patch_inputs * self.hidden

    def _head_parameters(self) -> int:
        if self.family == "vit":
            return 2 * self.hidden
        projection = 0 if self.tied_embeddings else self.vocab * self.hidden
        norm = self.hidden if self.family == "llama" else 2 * self.hidden
        if self.family == "bert":   # the masked-LM transform (dense, LayerNorm) and the pooler
            return projection + 2 * (self.hidden * self.hidden + self.hidden) + 2 * self.hidden + self.vocab
        return projection + norm

    @property
    def parameters(self) -> int:
        """Parameter count of the whole model (unsharded)."""
        layers = sum(self.layer_parameters(kind) * n for kind, n in self.kinds.items())
        return layers + self._embedding_parameters() + self._head_parameters()

    @property
    def active_parameters(self) -> int:
        """Parameters one token passes through (the routed experts only)."""
        layers = sum(self.layer_parameters(kind, active=True) * n for kind, n in self.kinds.items())
        return layers + self._embedding_parameters() + self._head_parameters()

    def flops_per_token(self, context: int) -> float:
        """Forward matmul FLOPs per token with `context` attended tokens (for MFU): 2 per weight a token
        passes through (its routed experts; the output projection, not the embedding lookup), plus the
        attention scores and weighted values."""
        layers = sum(self.layer_parameters(kind, active=True) * n for kind, n in self.kinds.items())
        return 2.0 * (layers + self.vocab * self.hidden) + 4.0 * self.layers * self.heads * self.head_dim * context


def _positive_int(config: dict, *names, default=None) -> int:
    for name in names:
        if name in config and config[name] is not None:
            value = config[name]
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"config field {name!r} must be a positive integer, got {value!r}")
            if value >= LIMIT:
                raise ConfigError(f"config field {name!r} = {value} is beyond what any model has (< 2**40); "
                                  f"check the file")
            return value
    if default is not None:
        return default
    raise ConfigError(f"config has none of {list(names)}; the estimate needs it to build the model")


def _probability(config: dict, *names) -> float:
    for name in names:
        value = config.get(name)
        if value is not None:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
                raise ConfigError(f"config field {name!r} must be a probability in [0, 1), got {value!r}")
            return float(value)
    return 0.0


def _moe(config: dict, model_type: str, layers: int) -> tuple[Experts | None, tuple]:
    """The experts of a MoE config and which layers use them (each family names them its own way)."""
    count = config.get("num_local_experts") or config.get("num_experts")
    if not count:
        return None, ()
    count = _positive_int({"experts": count}, "experts")
    per_token = _positive_int(config, "num_experts_per_tok", default=2)
    if per_token > count:
        raise ConfigError(f"num_experts_per_tok={per_token} exceeds the {count} experts")
    shared = 0
    if model_type in ("llama4_text", "llama4"):
        intermediate = _positive_int(config, "intermediate_size")
        shared = intermediate                       # every MoE layer also runs a shared expert
        moe = config.get("moe_layers")
        if moe is None:
            step = _positive_int(config, "interleave_moe_layer_step", default=1)
            moe = list(range(step - 1, layers, step))
    else:
        intermediate = _positive_int(config, "moe_intermediate_size", "intermediate_size")
        shared = config.get("shared_expert_intermediate_size") or 0
        dense_only = set(config.get("mlp_only_layers") or ())
        step = _positive_int(config, "decoder_sparse_step", default=1)
        moe = [i for i in range(layers) if i not in dense_only and (i + 1) % step == 0]
    if not isinstance(moe, (list, tuple)) or not all(isinstance(i, int) and 0 <= i < layers for i in moe):
        raise ConfigError(f"config's MoE layer list must name layers 0..{layers - 1}, got {moe!r}")
    return Experts(count, per_token, intermediate, int(shared)), tuple(sorted(set(moe)))


def text_config(config: dict) -> dict:
    """The language model's part of a multimodal config (Llama-4 nests it as `text_config`)."""
    nested = config.get("text_config")
    if isinstance(nested, dict) and config.get("model_type") in ("llama4",):
        return {"model_type": "llama4_text", **{k: v for k, v in nested.items() if k != "model_type"}}
    return config


def from_config(config: dict) -> Architecture:
    if not isinstance(config, dict):
        raise ConfigError("config.json must hold a JSON object")
    config = text_config(config)
    model_type = str(config.get("model_type", "")).lower()
    if model_type in REFUSED:
        raise ConfigError(f"model_type {model_type!r} is {REFUSED[model_type]}, which the estimate does not build; "
                          f"pass --model-fn module:function (or --script) to estimate the model's own code")
    if model_type in LLAMA_FAMILY:
        hidden = _positive_int(config, "hidden_size")
        heads = _positive_int(config, "num_attention_heads")
        layers = _positive_int(config, "num_hidden_layers")
        experts, moe_layers = _moe(config, model_type, layers)
        dense = config.get("intermediate_size_mlp") if model_type.startswith("llama4") else None
        arch = Architecture(
            model_type=model_type, family="llama", hidden=hidden, layers=layers, heads=heads,
            kv_heads=_positive_int(config, "num_key_value_heads", default=heads),
            head_dim=_positive_int(config, "head_dim", default=max(1, hidden // heads)),
            intermediate=_positive_int({"intermediate_size": dense} if dense else config, "intermediate_size",
                                       default=experts.intermediate if experts else None),
            vocab=_positive_int(config, "vocab_size"),
            tied_embeddings=bool(config.get("tie_word_embeddings", False)),
            attention_bias=bool(config.get("attention_bias", model_type == "qwen2")),
            mlp_bias=bool(config.get("mlp_bias", False)), dropout=_probability(config, "attention_dropout"),
            qk_norm=model_type in ("qwen3", "qwen3_moe") or bool(config.get("use_qk_norm", False)),
            experts=experts, moe_layers=moe_layers)
    elif model_type in GPT_FAMILY:
        hidden = _positive_int(config, "n_embd", "hidden_size")
        heads = _positive_int(config, "n_head", "num_attention_heads")
        arch = Architecture(
            model_type=model_type, family="gpt", hidden=hidden, layers=_positive_int(config, "n_layer", "num_hidden_layers"),
            heads=heads, kv_heads=heads, head_dim=max(1, hidden // heads),
            intermediate=_positive_int(config, "n_inner", default=4 * hidden), vocab=_positive_int(config, "vocab_size"),
            tied_embeddings=bool(config.get("tie_word_embeddings", True)), attention_bias=True, mlp_bias=True,
            dropout=_probability(config, "resid_pdrop") if "resid_pdrop" in config else 0.1,
            positions=_positive_int(config, "n_positions", "max_position_embeddings", default=1024))
    elif model_type in ENCODERS:
        hidden = _positive_int(config, "hidden_size")
        heads = _positive_int(config, "num_attention_heads")
        common = dict(model_type=model_type, family=model_type, hidden=hidden,
                      layers=_positive_int(config, "num_hidden_layers"), heads=heads, kv_heads=heads,
                      head_dim=max(1, hidden // heads), intermediate=_positive_int(config, "intermediate_size"),
                      attention_bias=True, mlp_bias=True, dropout=_probability(config, "hidden_dropout_prob"))
        if model_type == "bert":
            arch = Architecture(**common, vocab=_positive_int(config, "vocab_size"), tied_embeddings=True,
                                positions=_positive_int(config, "max_position_embeddings", default=512)
                                + _positive_int(config, "type_vocab_size", default=2))
        else:
            image, patch = _positive_int(config, "image_size", default=224), _positive_int(config, "patch_size", default=16)
            channels = _positive_int(config, "num_channels", default=3)
            if patch > image:
                raise ConfigError(f"patch_size {patch} is larger than image_size {image}")
            tokens = (image // patch) ** 2 + 1   # the patches and the class token
            arch = Architecture(**common, vocab=0, tied_embeddings=False, positions=tokens, image_tokens=tokens,
                                patch_inputs=channels * patch * patch)
    else:
        known = sorted(LLAMA_FAMILY | GPT_FAMILY | ENCODERS)
        raise ConfigError(f"model_type {model_type!r} is not one the estimate builds itself ({', '.join(known)}); "
                          f"pass --model-fn module:function or --script for any other PyTorch model")
    if arch.heads % arch.kv_heads:
        raise ConfigError(f"num_attention_heads={arch.heads} is not a multiple of num_key_value_heads={arch.kv_heads}")
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
