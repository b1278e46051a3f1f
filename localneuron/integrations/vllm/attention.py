"""Paged attention on `neuron`: vLLM's CPU attention kernels run on the device's own memory.

Choice (reasoned, not measured against a torch-native backend): a torch-native paged attention would
gather every request's KV blocks, pad and mask them through a dozen eager device ops per layer and step,
each a launch; vLLM's CPU kernels read the paged cache in place. Device memory lives on the host, so the
kernels get zero-copy host aliases of the device tensors (same bytes, same strides) and write the
attention output and the KV cache in place: nothing is copied and nothing is computed off the
device's memory. On Trainium this is the job of a fused NKI paged-attention kernel, so the calls are
accounted here as device kernels, priced by the cost model as fused attention over each request's
context (stats.py), not as CPU fallbacks.

In a compiled model the graph's host code, which runs on host aliases of device memory, calls vLLM's
attention ops inline, as Inductor's graph does on vLLM's CPU platform; vLLM registers them for the
platform's dispatch key only, so they also get the same kernels for host aliases (register_host_kernels).
Without that, the graph would split at every attention op into pieces run one after another.
"""
import torch
from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend, CPUAttentionBackendImpl

from localneuron import _C
from localneuron.integrations.vllm import report, stats  # noqa: F401  (report: registers the vLLM section)


# vLLM's attention ops (vllm/model_executor/layers/attention/attention.py) that a compiled model calls
ATTENTION_OPS = ("unified_attention_with_output", "unified_kv_cache_update")
_host_kernels: torch.library.Library | None = None


def register_host_kernels() -> None:
    """Registers vLLM's own op functions as the ops' kernels for host tensors (once per process): they
    look the layer up and call NeuronAttentionImpl, which takes device tensors and host aliases alike."""
    global _host_kernels
    if _host_kernels is not None:
        return
    from vllm.model_executor.layers.attention import attention

    _host_kernels = torch.library.Library("vllm", "IMPL")
    for name in ATTENTION_OPS:
        _host_kernels.impl(name, getattr(attention, name), "CPU")


def _host(t):
    return _C.cpu_alias(t) if isinstance(t, torch.Tensor) and t.device.type == "neuron" else t


class NeuronAttentionImpl(CPUAttentionBackendImpl):
    def forward(self, layer, query, key, value, kv_cache, attn_metadata, output, output_scale=None,
                output_block_scale=None):
        if attn_metadata is not None:
            stats.record_attention(query, kv_cache, attn_metadata, self.num_kv_heads)
        super().forward(layer, _host(query), _host(key), _host(value), _host(kv_cache), attn_metadata,
                        _host(output), output_scale, output_block_scale)
        return output

    def do_kv_cache_update(self, layer, key, value, kv_cache, slot_mapping) -> None:
        stats.record_kv_cache_write(key, value)
        super().do_kv_cache_update(layer, _host(key), _host(value), _host(kv_cache), slot_mapping)


class NeuronAttentionBackend(CPUAttentionBackend):
    @staticmethod
    def get_impl_cls():
        return NeuronAttentionImpl
