"""The errors the backend raises on purpose, with the texts users search for (docs/support-matrix.md#torchcompile).

They derive from NeuronCompileError so that fallback execution (TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION=0)
never hides them: they describe the program, not a compiler failure.
"""


class NeuronCompileError(RuntimeError):
    """A graph the neuron backend refuses to compile, whatever the fallback setting."""


def dynamic_shapes(detail: str) -> NeuronCompileError:
    return NeuronCompileError(
        "Unbounded dynamism is disabled: the neuron backend compiles static shapes only and does not support "
        f"torch.compile(dynamic=True) ({detail}). Leave `dynamic` unset or pass dynamic=False; every new input "
        "shape then compiles its own graph. Pad or bucket inputs to limit recompiles.")


def fullgraph_eager_op(op: str, reason: str) -> NeuronCompileError:
    return NeuronCompileError(
        f"Graph break on {op}: {reason}, so it cannot be part of a fullgraph=True graph. Use fullgraph=False to "
        "compile the code around it and run it eagerly, or move it out of the compiled function.")


def cpu_input(index: int) -> RuntimeError:
    return RuntimeError(f"Input tensor at index {index} is on cpu device, expected neuron. Move tensor to Neuron "
                        "device first with tensor.to('neuron')")


def mixed_input_devices(a, b) -> RuntimeError:
    return RuntimeError(f"cannot mix input devices with TORCH_NEURONX_RETAIN_DEVICE_MODE=1, got {a} and {b}")
