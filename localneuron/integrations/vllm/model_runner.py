"""vLLM's model runner with the model and the KV cache on `neuron`.

The runner's own buffers (token ids, positions, block tables, slot mappings, sampling state) stay on the
host: vLLM fills them there every step. The model's inputs cross to the device when the model is
called, the KV cache is allocated in HBM, and logits come back to the host for the sampler (one
[tokens, vocab] transfer per step).
"""
import torch
from vllm.v1.worker.cpu_model_runner import CPUModelRunner

from localneuron.integrations.vllm import stats


def _to_device(value, device):
    return value.to(device, non_blocking=True) if isinstance(value, torch.Tensor) else value


class NeuronModelRunner(CPUModelRunner):
    def __init__(self, vllm_config, host_device: torch.device, neuron_device: torch.device):
        super().__init__(vllm_config, host_device)
        self.neuron_device = neuron_device

    def load_model(self, load_dummy_weights: bool = False) -> None:
        super().load_model(load_dummy_weights)
        placed = {p.device for p in self.model.parameters()}
        if placed != {self.neuron_device}:
            raise RuntimeError(f"vLLM placed the model's weights on {placed}, expected {self.neuron_device}")
        stats.hbm.update(device=str(self.neuron_device), weights_bytes=sum(
            t.numel() * t.element_size() for t in (*self.model.parameters(), *self.model.buffers())
            if t.device == self.neuron_device))
        self.model.register_forward_pre_hook(self._inputs_to_device, with_kwargs=True)
        device_logits = self.model.compute_logits
        self.model.compute_logits = lambda hidden_states, *a, **k: _logits_to_host(device_logits, hidden_states,
                                                                                  *a, **k)

    def _inputs_to_device(self, module, args, kwargs):
        device = self.neuron_device
        return (tuple(_to_device(a, device) for a in args),
                {name: _to_device(value, device) for name, value in kwargs.items()})

    def initialize_kv_cache_tensors(self, kv_cache_config, kernel_block_sizes, kv_cache_allocation_context=None):
        # vLLM allocates the KV cache on the runner's device, which is the host here (see module doc).
        host = self.device
        self.device = self.neuron_device
        try:
            caches = super().initialize_kv_cache_tensors(kv_cache_config, kernel_block_sizes,
                                                         kv_cache_allocation_context)
        finally:
            self.device = host
        stats.hbm.update(kv_cache_bytes=sum(t.size for t in kv_cache_config.kv_cache_tensors),
                         kv_cache_blocks=kv_cache_config.num_blocks)
        return caches


def _logits_to_host(compute_logits, hidden_states, *args, **kwargs):
    logits = compute_logits(hidden_states, *args, **kwargs)
    if logits is None:
        return None
    stats.record_step(tokens=logits.shape[0])
    return logits.to("cpu")
