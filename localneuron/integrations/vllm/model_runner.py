"""vLLM's model runner with the model and the KV cache on `neuron`.

The runner's own buffers (token ids, positions, block tables, slot mappings, sampling state) stay on the
host: vLLM fills them there every step. The model's inputs cross to the device when the model is
called, the KV cache is allocated in HBM, and logits come back to the host for the sampler (one
[tokens, vocab] transfer per step). Unless vLLM runs eagerly (`--enforce-eager`), the model's forward
is compiled for the device with batches padded to buckets (compiled_model.py).
"""
import dataclasses

import torch
from vllm.config import CompilationMode
from vllm.v1.worker.cpu_model_runner import CPUModelRunner

from localneuron.integrations.vllm import compiled_model, report, stats  # noqa: F401  (report: the vLLM section)


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
        if self.compiled:
            compiled_model.compile_forward(self.model, self.compilation_config.init_backend(self.vllm_config),
                                           self.max_num_tokens)
        device_logits = self.model.compute_logits
        self.model.compute_logits = lambda hidden_states, *a, **k: _logits_to_host(device_logits, hidden_states,
                                                                                  *a, **k)

    @property
    def compiled(self) -> bool:
        return self.compilation_config.mode == CompilationMode.STOCK_TORCH_COMPILE

    def compile_buckets(self) -> None:
        """Runs the model once per bucket, so that no graph is compiled while requests wait."""
        if self.compiled:
            for size in compiled_model.buckets(self.max_num_tokens):
                self._dummy_run(size)

    def _determine_batch_execution_and_padding(self, num_tokens: int, *args, **kwargs):
        mode, batch, *rest = super()._determine_batch_execution_and_padding(num_tokens, *args, **kwargs)
        if self.compiled:
            # vLLM pads the inputs up to batch.num_tokens (slot -1, no attention for the padding)
            batch = dataclasses.replace(batch, num_tokens=compiled_model.padded(batch.num_tokens,
                                                                                self.max_num_tokens))
        return (mode, batch, *rest)

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
