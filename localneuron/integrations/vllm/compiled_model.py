"""The model compiled by torch.compile(backend="neuron"), with its batches padded to a few token counts.

vLLM's CPU platform compiles one graph with a dynamic token count (Inductor); a NeuronCore runs static
shapes, so every new token count would compile a new graph. As on Trainium (vLLM's Neuron plugin pads
to bucket sizes), the runner pads each batch's token count up to the next power of two, capped at the
engine's largest batch, and compiles every bucket before serving: at most log2(max tokens) + 1 graphs,
none compiled while requests wait. vLLM's `--enforce-eager` keeps the model eager instead.

The graph's host code calls vLLM's attention ops inline on host aliases of the device's memory
(attention.register_host_kernels), so each bucket compiles to one piece.

Each step then runs its bucket's graph without Dynamo's guards (BucketedForward): Dynamo checks a frame's
guards on every call, cache entry after cache entry, which over a dozen bucket graphs of a small model cost
as much host time as the graph's GEMMs.
"""
import types

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
    model.forward = BucketedForward(model.forward, backend)


# argument values a graph may be specialised on, which therefore belong to the key of its bucket
_KEYED_VALUES = (type(None), bool, int, float, str)


def _input_key(args: tuple, kwargs: dict) -> tuple | None:
    """What tells the buckets' graphs apart: every tensor argument's shape, strides and dtype, and every plain
    value, and the grad mode; None (no direct call) when an argument is something else, whose contents Dynamo
    may have guarded."""
    key = [torch.is_grad_enabled()]
    for name, value in (*enumerate(args), *kwargs.items()):
        if isinstance(value, torch.Tensor):
            key.append((name, value.shape, value.stride(), value.dtype, value.device))
        elif isinstance(value, _KEYED_VALUES):
            key.append((name, value))
        else:
            return None
    return tuple(key)


class BucketedForward:
    """The model's forward under torch.compile, each bucket's graph then called without Dynamo's guards.

    A bucket's first call compiles through torch.compile (fullgraph: the whole forward is one Dynamo graph),
    and the bytecode Dynamo generated for it, which calls the compiled graph, is kept; later calls whose
    inputs have the same shapes run that bytecode directly. What else the guards check (the module tree,
    parameters, grad mode) does not change while the engine serves, which is why vLLM drops all guards in
    its own compiled modes (vllm/compilation/wrapper.py, whose bytecode hook this follows). The graph's
    host code still asserts its inputs' sizes and strides.
    """

    def __init__(self, forward, backend):
        self._function, self._module = forward.__func__, forward.__self__
        self._compiled = torch.compile(forward, backend=backend, dynamic=False, fullgraph=True)
        self._by_inputs: dict[tuple, types.FunctionType] = {}
        self._transformed: types.CodeType | None = None
        self._hook = torch._dynamo.convert_frame.register_bytecode_hook(self._keep_transformed)

    def _keep_transformed(self, code: types.CodeType, transformed: types.CodeType) -> None:
        if code is self._function.__code__:
            self._transformed = transformed

    def __call__(self, *args, **kwargs):
        key = _input_key(args, kwargs)
        direct = self._by_inputs.get(key)
        if direct is not None:
            return direct(self._module, *args, **kwargs)
        self._transformed = None
        result = self._compiled(*args, **kwargs)
        if key is not None and self._transformed is not None:
            # Dynamo's bytecode has the original's arguments, closure and globals (where it put the graph)
            f = self._function
            direct = types.FunctionType(self._transformed, f.__globals__, f.__name__, f.__defaults__, f.__closure__)
            direct.__kwdefaults__ = f.__kwdefaults__
            self._by_inputs[key] = direct
        return result
