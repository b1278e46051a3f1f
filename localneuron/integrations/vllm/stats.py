"""What the vLLM engine did on `neuron` beyond the op tracker: its paged-attention kernel calls with
their estimated device time, the tokens it produced, and how it budgeted HBM. report.py renders it."""
import threading

import torch

from localneuron.costmodel.ops import eager_seconds
from localneuron.runtime.config import selected_target

FUSED_ATTENTION = "aten::_scaled_dot_product_fused_attention_overrideable"

_lock = threading.Lock()
_counters = {"attention_calls": 0, "attention_seconds": 0.0, "kv_cache_writes": 0, "kv_cache_write_seconds": 0.0,
             "steps": 0, "tokens": 0}
hbm: dict[str, int] = {}


def _meta(*shape, dtype):
    return torch.empty(shape, dtype=dtype, device="meta")


def record_attention(query: torch.Tensor, kv_cache: torch.Tensor, metadata, num_kv_heads: int) -> None:
    """Prices the call as one fused attention per request: its new tokens against its whole context."""
    chip = selected_target()
    heads, head_dim, dtype = query.shape[1], query.shape[2], query.dtype
    starts = metadata.query_start_loc.tolist()
    seconds = 0.0
    for request, context in enumerate(metadata.seq_lens.tolist()):
        new_tokens = starts[request + 1] - starts[request]
        q = _meta(1, heads, new_tokens, head_dim, dtype=dtype)
        kv = _meta(1, num_kv_heads, context, head_dim, dtype=kv_cache.dtype)
        seconds += eager_seconds(chip, FUSED_ATTENTION, [q, kv, kv], [q])
    with _lock:
        _counters["attention_calls"] += 1
        _counters["attention_seconds"] += seconds


def record_kv_cache_write(key: torch.Tensor, value: torch.Tensor) -> None:
    chip = selected_target()
    seconds = eager_seconds(chip, "aten::index_put_", [key, value], [key, value])
    with _lock:
        _counters["kv_cache_writes"] += 1
        _counters["kv_cache_write_seconds"] += seconds


def record_step(tokens: int) -> None:
    with _lock:
        _counters["steps"] += 1
        _counters["tokens"] += tokens


def snapshot() -> dict:
    with _lock:
        return dict(_counters)
