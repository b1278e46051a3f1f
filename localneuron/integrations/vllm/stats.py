"""What the vLLM engine did on `neuron` beyond the op tracker: its paged-attention kernel calls with
their estimated device time, the tokens it produced, and how it budgeted HBM. report.py renders it.

The hot path only counts the shapes of each call; the cost model prices each distinct shape once, when
the counters are read, at report time (pricing is Python work the engine would otherwise pay per layer and step).
"""
import threading
from collections import Counter

import torch

from localneuron.costmodel.ops import eager_seconds
from localneuron.runtime.config import selected_target

FUSED_ATTENTION = "aten::_scaled_dot_product_fused_attention_overrideable"

_lock = threading.Lock()
_counters = {"attention_calls": 0, "kv_cache_writes": 0, "steps": 0, "tokens": 0}
# (heads, new tokens, kv heads, context, head dim, query dtype, cache dtype) -> requests priced as one attention
_attention_shapes: Counter = Counter()
# The step being run: its attention metadata, which all its layers share, and per kind of layer the requests'
# shapes with the calls over them; folded into _attention_shapes when the next step starts or the counters are
# read, so that the per-layer hot path neither reads the metadata back nor counts each request.
_step: dict = {"metadata": None, "calls": {}}
# (key shape, dtype) -> KV-cache writes
_kv_write_shapes: Counter = Counter()
hbm: dict[str, int] = {}


def _meta(*shape, dtype):
    return torch.empty(shape, dtype=dtype, device="meta")


def _attention_seconds(chip, heads, new_tokens, kv_heads, context, head_dim, dtype, kv_dtype) -> float:
    """One fused attention of a request's new tokens against its whole context."""
    q = _meta(1, heads, new_tokens, head_dim, dtype=dtype)
    kv = _meta(1, kv_heads, context, head_dim, dtype=kv_dtype)
    return eager_seconds(chip, FUSED_ATTENTION, [q, kv, kv], [q])


def _kv_write_seconds(chip, shape, dtype) -> float:
    key = _meta(*shape, dtype=dtype)
    return eager_seconds(chip, "aten::index_put_", [key, key], [key, key])


def _fold_step() -> None:
    for shapes, calls in _step["calls"].values():
        for shape in shapes:
            _attention_shapes[shape] += calls
    _step["calls"] = {}


def record_attention(query: torch.Tensor, kv_cache: torch.Tensor, metadata, num_kv_heads: int) -> None:
    heads, head_dim = query.shape[1], query.shape[2]
    layer = (heads, num_kv_heads, head_dim, query.dtype, kv_cache.dtype)
    with _lock:
        _counters["attention_calls"] += 1
        if _step["metadata"] is not metadata:
            _fold_step()
            _step["metadata"] = metadata
        entry = _step["calls"].get(layer)
        if entry is None:
            starts = metadata.query_start_loc.tolist()
            shapes = [(heads, starts[request + 1] - starts[request], num_kv_heads, context, head_dim, query.dtype,
                       kv_cache.dtype) for request, context in enumerate(metadata.seq_lens.tolist())]
            entry = _step["calls"][layer] = [shapes, 0]
        entry[1] += 1


def record_kv_cache_write(key: torch.Tensor, value: torch.Tensor) -> None:
    with _lock:
        _counters["kv_cache_writes"] += 1
        _kv_write_shapes[(tuple(key.shape), key.dtype)] += 1


def record_step(tokens: int) -> None:
    with _lock:
        _counters["steps"] += 1
        _counters["tokens"] += tokens


def snapshot() -> dict:
    chip = selected_target()
    with _lock:
        _fold_step()
        counters = dict(_counters)
        attention, kv_writes = dict(_attention_shapes), dict(_kv_write_shapes)
    counters["attention_seconds"] = sum(_attention_seconds(chip, *shape) * n for shape, n in attention.items())
    counters["kv_cache_write_seconds"] = sum(_kv_write_seconds(chip, *shape) * n for shape, n in kv_writes.items())
    return counters
