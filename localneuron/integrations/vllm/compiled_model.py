"""The model compiled by torch.compile(backend="neuron"), with its batches padded to a few token counts.

vLLM's CPU platform compiles one graph with a dynamic token count (Inductor); a NeuronCore runs static
shapes, so every new token count would compile a new graph. As on Trainium (vLLM's Neuron plugin pads
to bucket sizes), the runner pads each batch's token count up to the next power of two, capped at the
engine's largest batch, and compiles every bucket before serving: at most log2(max tokens) + 1 graphs,
none compiled while requests wait. vLLM's `--enforce-eager` keeps the model eager instead.

The graph's host code calls vLLM's attention ops inline on host aliases of the device's memory
(attention.register_host_kernels), so each bucket compiles to one piece.
"""
import torch

from localneuron.integrations.vllm import attention


def buckets(max_tokens: int) -> list[int]:
    """Token counts a batch is padded to: powers of two below max_tokens, then max_tokens itself."""
    if max_tokens < 1:
        raise ValueError(f"the engine's largest batch must hold at least one token, got {max_tokens}")
    sizes = [1 << i for i in range(max_tokens.bit_length()) if 1 << i < max_tokens]
    return [*sizes, max_tokens]


def padded(num_tokens: int, max_tokens: int) -> int:
    """The bucket a batch of num_tokens runs in."""
    if not 1 <= num_tokens <= max_tokens:
        raise ValueError(f"a batch of {num_tokens} tokens is outside the engine's 1..{max_tokens}")
    return next(size for size in buckets(max_tokens) if size >= num_tokens)


def compile_forward(model: torch.nn.Module, backend, max_tokens: int) -> None:
    """Compiles the model's forward for static shapes; module hooks stay eager around it (the runner's
    hook moves the host-prepared inputs to the device before the compiled graph sees them)."""
    # one graph per bucket, plus one for vLLM's profile run at the largest batch
    limit = len(buckets(max_tokens)) + 1
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, limit)
    torch._dynamo.config.accumulated_recompile_limit = max(torch._dynamo.config.accumulated_recompile_limit,
                                                           limit)
    attention.register_host_kernels()
    model.forward = torch.compile(model.forward, backend=backend, dynamic=False)
