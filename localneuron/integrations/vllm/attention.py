"""Paged attention on `neuron`: vLLM's CPU attention kernels run on the device's own memory.

Choice (reasoned, not measured against a torch-native backend): a torch-native paged attention would
gather every request's KV blocks, pad and mask them through a dozen eager device ops per layer and step,
each a launch; vLLM's CPU kernels read the paged cache in place. Device memory lives on the host, so the
kernels get zero-copy host aliases of the device tensors (same bytes, same strides) and write the
attention output and the KV cache in place: nothing is copied and nothing is computed off the
device's memory. On Trainium this is the job of a fused NKI paged-attention kernel, so the calls are
accounted here as device kernels, priced by the cost model as fused attention over each request's
context (stats.py), not as CPU fallbacks.
"""
import torch
from vllm.v1.attention.backends.cpu_attn import CPUAttentionBackend, CPUAttentionBackendImpl

from localneuron import _C
from localneuron.integrations.vllm import stats


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
