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
# Physical limits on a model's sizes: well above any published model, far below sizes whose products
# overflow the shapes and byte counts the estimate computes. size -> (largest, why)
SIZE_LIMITS = {
    "layers": (10_000, "the deepest published models have a few hundred layers"),
    "hidden": (1 << 20, "the widest published models have hidden sizes of a few 10,000s"),
    "heads": (1 << 14, "published models have at most a few hundred attention heads"),
    "head_dim": (1 << 14, "published heads are 64 to 256 wide"),
    "intermediate": (1 << 22, "the widest published MLPs have a few 10,000s of hidden units"),
    "vocab": (1 << 24, "the largest published vocabularies have a few 100,000 tokens"),
    "experts": (1 << 14, "published mixtures have at most a few hundred experts"),
    "positions": (1 << 26, "the longest published contexts are about 10 million tokens"),
    "image": (1 << 15, "images of published vision models are at most a few 1,000 pixels a side"),
    "channels": (1 << 10, "images have a few channels"),
}
# config field -> the size it gives
SIZE_FIELDS = {
    "num_hidden_layers": "layers", "n_layer": "layers", "interleave_moe_layer_step": "layers",
    "decoder_sparse_step": "layers", "hidden_size": "hidden", "n_embd": "hidden", "num_attention_heads": "heads",
    "n_head": "heads", "num_key_value_heads": "heads", "head_dim": "head_dim", "intermediate_size": "intermediate",
    "intermediate_size_mlp": "intermediate", "n_inner": "intermediate", "moe_intermediate_size": "intermediate",
    "shared_expert_intermediate_size": "intermediate", "vocab_size": "vocab", "type_vocab_size": "vocab",
    "num_local_experts": "experts", "num_experts": "experts", "num_experts_per_tok": "experts",
    "max_position_embeddings": "positions", "n_positions": "positions", "image_size": "image",
    "patch_size": "image", "num_channels": "channels",
}
# config fields that are JSON booleans (a string "false" would read as true)
FLAG_FIELDS = ("tie_word_embeddings", "attention_bias", "mlp_bias", "use_qk_norm")
# the most bytes a parameter takes (fp32 weights, gradients and two Adam moments): the model's bytes must
# stay a 64-bit count
BYTES_PER_PARAMETER = 16
MAX_CONFIG_BYTES = 16 << 20   # a config.json is a few kilobytes


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


def _size(name: str, value, smallest: int = 1) -> int:
    """A size field's value, checked: an integer from `smallest` to its physical limit."""
    if isinstance(value, bool) or not isinstance(value, int) or value < smallest:
        raise ConfigError(f"config field {name!r} must be {'a positive' if smallest else 'a non-negative'} integer, "
                          f"got {value!r}")
    size = SIZE_FIELDS[name]
    largest, why = SIZE_LIMITS[size]
    if value > largest:
        raise ConfigError(f"config field {name!r} = {value} is beyond any model (at most {largest}: {why}); "
                          f"check the file")
    return value


def _positive_int(config: dict, *names, default=None) -> int:
    for name in names:
        if config.get(name) is not None:
            return _size(name, config[name])
    if default is not None:
        return default
    raise ConfigError(f"config has none of {list(names)}; the estimate needs it to build the model")


def _flag(config: dict, name: str, default: bool) -> bool:
    value = config.get(name)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise ConfigError(f"config field {name!r} must be a JSON boolean (true or false), got {value!r}")
    return value


def _layer_list(config: dict, name: str, layers: int) -> list | None:
    value = config.get(name)
    if value is not None and not (isinstance(value, list) and all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers for i in value)):
        raise ConfigError(f"config field {name!r} must list layers 0..{layers - 1}, got {value!r}")
    return value


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
    count = next((_size(name, config[name], smallest=0) for name in ("num_local_experts", "num_experts")
                  if config.get(name) is not None), 0)
    if not count:
        return None, ()
    per_token = _positive_int(config, "num_experts_per_tok", default=2)
    if per_token > count:
        raise ConfigError(f"num_experts_per_tok={per_token} exceeds the {count} experts")
    shared = 0
    if model_type in ("llama4_text", "llama4"):
        intermediate = _positive_int(config, "intermediate_size")
        shared = intermediate                       # every MoE layer also runs a shared expert
        moe = _layer_list(config, "moe_layers", layers)
        if moe is None:
            step = _positive_int(config, "interleave_moe_layer_step", default=1)
            moe = list(range(step - 1, layers, step))
    else:
        intermediate = _positive_int(config, "moe_intermediate_size", "intermediate_size")
        shared = config.get("shared_expert_intermediate_size")
        shared = 0 if shared is None else _size("shared_expert_intermediate_size", shared, smallest=0)
        dense_only = set(_layer_list(config, "mlp_only_layers", layers) or ())
        step = _positive_int(config, "decoder_sparse_step", default=1)
        moe = [i for i in range(layers) if i not in dense_only and (i + 1) % step == 0]
    return Experts(count, per_token, intermediate, shared), tuple(sorted(set(moe)))


def text_config(config: dict) -> dict:
    """The language model's part of a multimodal config (Llama-4 nests it as `text_config`)."""
    nested = config.get("text_config")
    if nested is not None and not isinstance(nested, dict):
        raise ConfigError(f"config field 'text_config' must be a JSON object, got {nested!r}")
    if nested is not None and config.get("model_type") in ("llama4",):
        return {"model_type": "llama4_text", **{k: v for k, v in nested.items() if k != "model_type"}}
    return config


def from_config(config: dict) -> Architecture:
    if not isinstance(config, dict):
        raise ConfigError("config.json must hold a JSON object")
    config = text_config(config)
    model_type = config.get("model_type", "")
    if not isinstance(model_type, str):
        raise ConfigError(f"config field 'model_type' must be a string, got {model_type!r}")
    model_type = model_type.lower()
    if model_type in REFUSED:
        raise ConfigError(f"model_type {model_type!r} is {REFUSED[model_type]}, which the estimate does not build; "
                          f"pass --model-fn module:function (or --script) to estimate the model's own code")
    if model_type in LLAMA_FAMILY:
        hidden = _positive_int(config, "hidden_size")
        heads = _positive_int(config, "num_attention_heads")
        layers = _positive_int(config, "num_hidden_layers")
        experts, moe_layers = _moe(config, model_type, layers)
        arch = Architecture(
            model_type=model_type, family="llama", hidden=hidden, layers=layers, heads=heads,
            kv_heads=_positive_int(config, "num_key_value_heads", default=heads),
            head_dim=_positive_int(config, "head_dim", default=max(1, hidden // heads)),
            intermediate=_positive_int(config, *(("intermediate_size_mlp",) if model_type.startswith("llama4") else ()),
                                       "intermediate_size", default=experts.intermediate if experts else None),
            vocab=_positive_int(config, "vocab_size"),
            tied_embeddings=_flag(config, "tie_word_embeddings", False),
            attention_bias=_flag(config, "attention_bias", model_type == "qwen2"),
            mlp_bias=_flag(config, "mlp_bias", False), dropout=_probability(config, "attention_dropout"),
            qk_norm=model_type in ("qwen3", "qwen3_moe") or _flag(config, "use_qk_norm", False),
            experts=experts, moe_layers=moe_layers)
    elif model_type in GPT_FAMILY:
        hidden = _positive_int(config, "n_embd", "hidden_size")
        heads = _positive_int(config, "n_head", "num_attention_heads")
        arch = Architecture(
            model_type=model_type, family="gpt", hidden=hidden, layers=_positive_int(config, "n_layer", "num_hidden_layers"),
            heads=heads, kv_heads=heads, head_dim=max(1, hidden // heads),
            intermediate=_positive_int(config, "n_inner", default=4 * hidden), vocab=_positive_int(config, "vocab_size"),
            tied_embeddings=_flag(config, "tie_word_embeddings", True), attention_bias=True, mlp_bias=True,
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
            if tokens > SIZE_LIMITS["positions"][0]:
                raise ConfigError(f"image_size {image} in patches of {patch} makes {tokens} tokens, beyond any "
                                  f"model's sequence (at most {SIZE_LIMITS['positions'][0]})")
            arch = Architecture(**common, vocab=0, tied_embeddings=False, positions=tokens, image_tokens=tokens,
                                patch_inputs=channels * patch * patch)
    else:
        known = sorted(LLAMA_FAMILY | GPT_FAMILY | ENCODERS)
        raise ConfigError(f"model_type {model_type!r} is not one the estimate builds itself ({', '.join(known)}); "
                          f"pass --model-fn module:function or --script for any other PyTorch model")
    if arch.heads % arch.kv_heads:
        raise ConfigError(f"num_attention_heads={arch.heads} is not a multiple of num_key_value_heads={arch.kv_heads}")
    if arch.parameters * BYTES_PER_PARAMETER >= 1 << 63:
        raise ConfigError(f"the config's sizes make {arch.parameters:.3g} parameters, whose bytes no 64-bit count "
                          f"holds (nor any cluster); check the file")
    return arch


def load(path: str) -> tuple[dict, Architecture]:
    config = read(path)
    return config, from_config(config)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ConfigError(f"{text} is not a finite number")
    return value


def _not_a_number(constant: str):
    raise ConfigError(f"{constant} is not a finite number")


def read(path: str) -> dict:
    """A config.json as a JSON object, with a clear error for a missing, huge or broken file, a
    non-finite number anywhere in it (Python's json reads NaN and Infinity), or size and flag fields of
    the wrong type or beyond any model (also those of the nested text_config, for the models --as-written
    builds)."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"--hf-config {path}: no such file")
    if p.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"--hf-config {path} has {p.stat().st_size} bytes; a config.json has a few thousand "
                          f"(at most {MAX_CONFIG_BYTES} read)")
    try:
        config = json.loads(p.read_bytes().decode("utf-8"), parse_float=_finite, parse_constant=_not_a_number)
    except ConfigError as error:
        raise ConfigError(f"--hf-config {path}: {error}; a config holds finite numbers") from None
    except (ValueError, RecursionError) as error:   # bad JSON or UTF-8, digits beyond int's limit, nested too deep
        reason = "nested too deeply" if isinstance(error, RecursionError) else str(error).splitlines()[0]
        raise ConfigError(f"--hf-config {path} is not valid JSON: {reason}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"--hf-config {path} must hold a JSON object")
    for section in (config, text_config(config)):
        for name in SIZE_FIELDS.keys() & section.keys():
            if section[name] is not None:
                _size(name, section[name], smallest=0)
        for name in FLAG_FIELDS:
            _flag(section, name, False)
    return config


def shard(n: int, parts: int) -> int:
    """Per-rank share of n heads/units split over `parts` ranks (padded up when uneven)."""
    return math.ceil(n / parts)
