"""Which NeuronCore engine an executable occupies on the device timeline.

A NeuronCore has a TensorE (matrix multiply), a VectorE (element-wise and reductions), a ScalarE
(activation functions by table lookup), a GpSimdE (general-purpose cores: gathers, scatters, sorts)
and DMA queues; collectives run on their own cores. An eager executable is shown on the engine that
does its main work (reference/nki-hardware-profiler.md §9.2).
"""
TENSOR_E, VECTOR_E, SCALAR_E, GPSIMD_E, DMA, COLLECTIVES = "TensorE", "VectorE", "ScalarE", "GpSimdE", "DMA", "Collectives"

# resource id of each track inside one NeuronCore's process in the trace, in display order
TRACKS = (TENSOR_E, VECTOR_E, SCALAR_E, GPSIMD_E, DMA, COLLECTIVES)

ENGINE_OF_OP = {
    "aten::mm": TENSOR_E,
    "aten::bmm": TENSOR_E,
    "aten::addmm": TENSOR_E,
    "aten::baddbmm": TENSOR_E,
    "aten::matmul": TENSOR_E,
    "aten::linear": TENSOR_E,
    "aten::convolution": TENSOR_E,
    "aten::_convolution": TENSOR_E,
    "aten::convolution_backward": TENSOR_E,
    "aten::_scaled_dot_product_attention_math": TENSOR_E,
    "aten::_scaled_dot_product_flash_attention": TENSOR_E,
    "aten::_scaled_dot_product_flash_attention_backward": TENSOR_E,
    "aten::exp": SCALAR_E,
    "aten::log": SCALAR_E,
    "aten::tanh": SCALAR_E,
    "aten::sigmoid": SCALAR_E,
    "aten::gelu": SCALAR_E,
    "aten::gelu_backward": SCALAR_E,
    "aten::silu": SCALAR_E,
    "aten::rsqrt": SCALAR_E,
    "aten::sqrt": SCALAR_E,
    "aten::_softmax": SCALAR_E,
    "aten::_log_softmax": SCALAR_E,
    "aten::embedding": GPSIMD_E,
    "aten::embedding_dense_backward": GPSIMD_E,
    "aten::index": GPSIMD_E,
    "aten::index_select": GPSIMD_E,
    "aten::gather": GPSIMD_E,
    "aten::scatter": GPSIMD_E,
    "aten::scatter_add": GPSIMD_E,
    "aten::index_put_": GPSIMD_E,
    "aten::sort": GPSIMD_E,
    "aten::topk": GPSIMD_E,
    "aten::cumsum": GPSIMD_E,
    "aten::nll_loss_forward": GPSIMD_E,
    "aten::nll_loss_backward": GPSIMD_E,
}


def engine_of(op: str) -> str:
    return ENGINE_OF_OP.get(op, VECTOR_E)
