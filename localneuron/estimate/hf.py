"""`--hf-config --as-written` (the `hf` extra): the model is the one AutoModelForCausalLM.from_config
builds, as fake neuron tensors (no weights, no network), traced op by op with the device's routing: the
model priced exactly as its own code runs (its attention path, its recompute), where the default path
prices the tuned recipe (recipe.py). Any causal LM transformers knows works this way.

Tensor parallelism follows the model's own plan (transformers' `base_model_tp_plan`): each rank's shard
is built from a per-rank config (heads, kv heads -- replicated when fewer than the ranks --, MLP and
vocabulary split over tp, head size kept), and the plan's column/row-parallel modules record their
collectives. A layer is traced once: the model is traced with one and with two layers, the difference
is the layer, the rest is the embedding, final norm and head (priced on the last pipeline stage). A
model mixing kinds of layers (config `layer_types`) is traced this way per kind.
"""
import copy
import importlib.util
import math

import torch
from torch import nn

from localneuron.estimate import tensor_parallel
from localneuron.estimate.architecture import ConfigError, text_config
from localneuron.estimate.collective_markers import vocabulary_parallel_loss
from localneuron.estimate.layout import Layout
from localneuron.estimate.plan import DTYPES, Request, Stack, micro_batches, schedule_inference, schedule_train
from localneuron.estimate.traced import EMPTY, difference, trace_module

# config field -> what it counts; each is split over the tensor-parallel ranks (rounded up)
SHARDED_FIELDS = {
    "num_attention_heads": "attention heads",
    "num_key_value_heads": "kv heads (one replicated per rank when fewer than the ranks)",
    "intermediate_size": "MLP hidden units (of each expert, for MoE)",
    "moe_intermediate_size": "MoE expert hidden units",
    "shared_expert_intermediate_size": "shared expert hidden units",
}
VOCABULARY_MODULES = ("embed_tokens", "lm_head")   # a plan naming these splits the vocabulary too


def available() -> bool:
    return importlib.util.find_spec("transformers") is not None


def hf_config(config: dict):
    import transformers

    config = text_config(config)   # a multimodal config's language model (Llama-4)
    fields = {k: v for k, v in config.items() if k not in ("architectures", "auto_map", "quantization_config")}
    if not isinstance(fields.get("model_type"), str):
        raise ConfigError("config.json has no model_type; it is not a Hugging Face model config")
    from huggingface_hub.errors import StrictDataclassError   # what transformers' config validators raise

    try:
        return transformers.AutoConfig.for_model(**fields)
    except (ValueError, KeyError, TypeError, StrictDataclassError) as error:
        raise ConfigError(f"transformers {transformers.__version__} cannot read this config: {error}") from None


def _layer_count(config) -> int:
    layers = getattr(config, "num_hidden_layers", None)
    if not isinstance(layers, int) or layers < 1:
        raise ConfigError(f"config has no positive num_hidden_layers ({layers!r}); the estimate needs the layer count")
    return layers


def _moe_layers(config, layers: int) -> list:
    """Per layer: True where the MLP is the mixture of experts, False where it is dense, None for a
    config that does not mix them (Llama-4 alternates by moe_layers, Qwen-MoE by decoder_sparse_step
    and mlp_only_layers)."""
    moe = getattr(config, "moe_layers", None)
    if isinstance(moe, (list, tuple)):
        return [i in set(moe) for i in range(layers)]
    if hasattr(config, "decoder_sparse_step") or hasattr(config, "mlp_only_layers"):
        step = getattr(config, "decoder_sparse_step", None) or 1
        dense = set(getattr(config, "mlp_only_layers", None) or ())
        return [i not in dense and (i + 1) % step == 0 for i in range(layers)]
    return [None] * layers


def layer_kinds(config) -> dict:
    """Kind of layer, (attention type, MoE or dense MLP), -> how many the model has: one kind, unless
    the config lists `layer_types` (sliding-window and full attention layers mixed, for instance) or
    mixes dense and mixture-of-experts layers (priced layer by layer)."""
    layers = _layer_count(config)
    types = getattr(config, "layer_types", None) or [None] * layers
    if len(types) != layers:
        raise ConfigError(f"config lists {len(types)} layer_types for num_hidden_layers={layers}")
    kinds = list(zip(types, _moe_layers(config, layers)))
    return {kind: kinds.count(kind) for kind in dict.fromkeys(kinds)}


def rank_config(config, tp: int, layers: int, kind=(None, None)):
    """The config of one tensor-parallel rank's shard of a model cut to `layers` layers (of one kind)."""
    plan = getattr(config, "base_model_tp_plan", None) or {}
    if tp > 1 and not plan:
        raise ConfigError(f"transformers has no tensor-parallel plan for model_type {config.model_type!r}; "
                          f"estimate it with --tp 1, or with localneuron's builder (Llama/GPT families) by "
                          f"running without transformers")
    shard = copy.deepcopy(config)
    shard.num_hidden_layers = layers
    attention, moe = kind
    if getattr(shard, "layer_types", None):
        shard.layer_types = [attention or shard.layer_types[0]] * layers
    if isinstance(getattr(shard, "no_rope_layers", None), list):
        shard.no_rope_layers = shard.no_rope_layers[:1] * layers
    if moe is not None and isinstance(getattr(shard, "moe_layers", None), (list, tuple)):
        shard.moe_layers = list(range(layers)) if moe else []
    elif moe is not None:
        shard.mlp_only_layers, shard.decoder_sparse_step = ([] if moe else list(range(layers))), 1
    if tp == 1:
        return shard
    heads = config.num_attention_heads
    shard.head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    if getattr(config, "num_key_value_heads", None) is None:
        shard.num_key_value_heads = heads
    for name in SHARDED_FIELDS:
        value = getattr(shard, name, None)
        if isinstance(value, int) and value > 0:
            setattr(shard, name, math.ceil(value / tp))
    if any(name.split(".")[-1] in VOCABULARY_MODULES for name in _model_plan(config)):
        shard.vocab_size = math.ceil(config.vocab_size / tp)
        # the padding row belongs to one rank's slice of the vocabulary: on this rank it is row 0 or none
        pad = getattr(shard, "pad_token_id", None)
        if isinstance(pad, int) and not 0 <= pad < shard.vocab_size:
            shard.pad_token_id = pad % shard.vocab_size
    return shard


def _model_plan(config, train: bool = False) -> dict:
    """The plan with the names the causal-LM wrapper gives its modules (model.layers..., lm_head). Training
    computes the loss on each rank's slice of the vocabulary (Megatron's vocabulary-parallel cross
    entropy, _Loss) instead of gathering the logits."""
    plan = {f"model.{name}": style for name, style in (getattr(config, "base_model_tp_plan", None) or {}).items()}
    head = "colwise" if train else "colwise_gather_output"
    return {**plan, "lm_head": head, "model.embed_tokens": "embedding_rowwise"} if plan else {}


def build(config, dtype: torch.dtype) -> nn.Module:
    import transformers

    with torch.device("neuron"):
        try:
            return transformers.AutoModelForCausalLM.from_config(config, dtype=dtype)
        except ValueError as error:   # a config class with no causal-LM head
            raise ConfigError(f"transformers builds no causal LM from this config: {error}") from None


class _Loss(nn.Module):
    """A training forward: next-token loss on the sequence itself; `vocabulary_ranks`: the ranks the head's
    output is split over (1: not split), each computing the loss on its slice and all-reducing the per-token
    reductions."""
    def __init__(self, model, vocabulary_ranks: int):
        super().__init__()
        self.model, self.vocabulary_ranks = model, vocabulary_ranks

    def forward(self, ids):
        loss = self.model(input_ids=ids, labels=ids).loss
        vocabulary_parallel_loss(ids.numel(), self.vocabulary_ranks)
        return loss


class _Generate(nn.Module):
    """An inference forward as generate() runs it: the cache filled or extended, the last position's logits."""
    def __init__(self, model, cache):
        super().__init__()
        self.model, self.cache = model, cache

    def forward(self, ids, *cache_tensors):   # the cache's tensors are passed only so the trace counts them
        return self.model(input_ids=ids, past_key_values=self.cache, use_cache=True, logits_to_keep=1).logits


def cache_tensors(cache) -> list:
    return [t for layer in getattr(cache, "layers", ()) for t in vars(layer).values() if isinstance(t, torch.Tensor)]


def _ids(batch: int, length: int) -> torch.Tensor:
    return torch.zeros(batch, length, dtype=torch.int64, device="neuron")


def _trace(config, layers: int, layout: Layout, request: Request, new_tokens: int, context: int,
           kind=(None, None)) -> tuple:
    """(traced model of `layers` layers of one kind, its cache's bytes per layer and token)"""
    dtype = DTYPES[request.dtype]
    model = build(rank_config(config, layout.tp, layers, kind), dtype)
    plan = _model_plan(config, request.mode == "train")
    tensor_parallel.add_collectives(model, plan, layout.tp)
    if request.mode == "train":
        ids = _ids(request.micro_batch, request.seq)
        if request.recompute == "full":
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        loss = _Loss(model, vocabulary_ranks=layout.tp if plan else 1)
        return trace_module(layout.chip, loss, (ids,), train=True), 0
    model.eval()
    cache = None
    if context:   # the cache a prefill of `context` tokens leaves behind
        with torch.no_grad():
            cache = model(input_ids=_ids(request.batch, context), use_cache=True).past_key_values
    with torch.no_grad():
        traced = trace_module(layout.chip, _Generate(model, cache), (_ids(request.batch, new_tokens),),
                              tuple(cache_tensors(cache)), kv_cache=tuple(cache_tensors(cache)))
    cached = sum(t.numel() * t.element_size() for t in cache_tensors(cache))
    return traced, cached / layers / max(context, 1)


def stack(config, layout: Layout, request: Request, new_tokens: int, context: int = 0) -> tuple[Stack, float]:
    """The model as a pipeline sees it, from traces of one and two layers of each kind (a pipeline
    stage holds an even share of each kind); and the cache bytes per layer and token."""
    layers = _layer_count(config)
    kinds, rest, cached = [], None, 0.0
    for kind, count in layer_kinds(config).items():
        one, _ = _trace(config, 1, layout, request, new_tokens, context, kind)
        two, cached_by_kind = _trace(config, 2, layout, request, new_tokens, context, kind)
        kinds.append((difference(two, one), count))
        if rest is None:
            rest = difference(one, kinds[0][0])
        cached += cached_by_kind * count / layers
    batch = request.micro_batch if request.mode == "train" else request.batch
    dtype = DTYPES[request.dtype]
    forward_flops = (sum(layer.flops * n for layer, n in kinds) + rest.flops) * layout.tp
    return Stack(kinds, EMPTY, rest, boundary_bytes=batch * new_tokens * config.hidden_size * dtype.itemsize,
                 model_flops=forward_flops), cached


def estimate(config_json: dict, layout: Layout, request: Request) -> tuple[dict, dict]:
    """(what the model is, the schedule's result)"""
    import transformers

    config = hf_config(config_json)
    if request.mode == "train":
        if request.recompute == "selective":
            raise ConfigError("--recompute selective recomputes the attention core of localneuron's Megatron builder; "
                              "a transformers model recomputes whole layers (--recompute full) or nothing (none)")
        micro_batches(layout, request)
        result = schedule_train(stack(config, layout, request, request.seq)[0], layout, request)
    else:
        prefill, cached = stack(config, layout, request, request.input_len)
        decode, total = None, request.input_len
        if request.mode == "decode":
            decode, cached = stack(config, layout, request.decoding(), 1, request.input_len + request.output_len // 2)
            total += request.output_len
        if not cached:   # a prefill that started from nothing: measure the cache it leaves, for every compiled slot
            cached = stack(config, layout, request.decoding(), 1, request.input_len)[1]
        kv_cache = math.ceil(prefill.layers / layout.pp) * cached * total
        result = schedule_inference(prefill, decode, layout, request, kv_cache)
    layers = result["traced"][0]
    return {
        "model_type": config.model_type, "built_with": f"transformers {transformers.__version__} "
        f"(AutoModelForCausalLM.from_config on fake neuron tensors, one layer traced)",
        "parameters": parameter_count(config), "layers": _layer_count(config), "hidden_size": config.hidden_size,
        "heads": config.num_attention_heads, "kv_heads": getattr(config, "num_key_value_heads", None)
        or config.num_attention_heads, "vocab_size": config.vocab_size,
        "rank_layer_parameters": layers.parameter_count}, result


def parameter_count(config) -> int:
    """The whole model's parameters (unsharded), from meta-device builds of one and two layers."""
    import transformers

    counts = []
    total = 0
    for kind, count in layer_kinds(config).items():
        counts = []
        for layers in (1, 2):
            with torch.device("meta"):
                model = transformers.AutoModelForCausalLM.from_config(rank_config(config, 1, layers, kind))
            counts.append(sum(p.numel() for p in model.parameters()))
        total = total or counts[0] - (counts[1] - counts[0])   # embedding, final norm, head
        total += (counts[1] - counts[0]) * count
    return total
