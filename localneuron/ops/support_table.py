"""Which ATen ops TorchNeuron runs on the NeuronCore and which it sends to the host.

Source: torch-neuronx snapshot (2026-04-21) python_ops/torch_mlir/ops/*.py, python_ops/__init__.py, python_ops/{copy,to_copy,grouped_mm}.py, python_ops/cpu_fallback_registrations.py, csrc/aten/{NeuronNativeFunctions,TensorShape}.cpp, docs/ops.html.
"""
NATIVE = "native"
CPU_FALLBACK = "cpu_fallback"

# op (ATen name without overload, "aten::name") -> rule
OP_SUPPORT = {
    "aten::_copy_from_and_resize": NATIVE,  # marked implemented only in docs/ops.html
    "aten::_foreach_add": NATIVE,
    "aten::_foreach_add_": NATIVE,
    "aten::_foreach_div": NATIVE,
    "aten::_foreach_div_": NATIVE,
    "aten::_foreach_mul": NATIVE,
    "aten::_foreach_mul_": NATIVE,
    "aten::_foreach_norm": NATIVE,
    "aten::_foreach_sub": NATIVE,
    "aten::_foreach_sub_": NATIVE,
    "aten::_fused_adamw_": NATIVE,
    "aten::_fused_rms_norm": NATIVE,
    "aten::_fused_rms_norm_backward": NATIVE,
    "aten::_grouped_mm": NATIVE,
    "aten::_has_compatible_shallow_copy_type": NATIVE,
    "aten::_index_put_impl_": NATIVE,
    "aten::_linalg_det": CPU_FALLBACK,  # explicitly routed to the host (cpu_fallback_registrations.py)
    "aten::_linalg_eigh": CPU_FALLBACK,  # explicitly routed to the host (cpu_fallback_registrations.py)
    "aten::_linalg_slogdet": CPU_FALLBACK,  # explicitly routed to the host (cpu_fallback_registrations.py)
    "aten::_linalg_svd": CPU_FALLBACK,  # explicitly routed to the host (cpu_fallback_registrations.py)
    "aten::_local_scalar_dense": NATIVE,  # reads the value back through a host copy
    "aten::_log_softmax": NATIVE,
    "aten::_log_softmax_backward_data": NATIVE,
    "aten::_native_multi_head_attention": NATIVE,
    "aten::_reshape_alias": NATIVE,
    "aten::_scaled_dot_product_fused_attention_overrideable": NATIVE,
    "aten::_scaled_dot_product_fused_attention_overrideable_backward": NATIVE,
    "aten::_scaled_mm": CPU_FALLBACK,  # no Neuron kernel in the snapshot
    "aten::_softmax": NATIVE,
    "aten::_softmax_backward_data": NATIVE,
    "aten::_to_copy": NATIVE,
    "aten::_upsample_bicubic2d_aa": CPU_FALLBACK,  # no Neuron kernel in the snapshot; unimplemented in docs/ops.html
    "aten::_upsample_bicubic2d_aa_backward": CPU_FALLBACK,  # no Neuron kernel in the snapshot; unimplemented in docs/ops.html
    "aten::_upsample_bilinear2d_aa": CPU_FALLBACK,  # no Neuron kernel in the snapshot; unimplemented in docs/ops.html
    "aten::_upsample_bilinear2d_aa_backward": CPU_FALLBACK,  # no Neuron kernel in the snapshot; unimplemented in docs/ops.html
    "aten::abs": NATIVE,
    "aten::add": NATIVE,
    "aten::add_": NATIVE,
    "aten::addcdiv": NATIVE,
    "aten::addcmul": NATIVE,
    "aten::addmm": NATIVE,
    "aten::addmv": NATIVE,
    "aten::addmv_": NATIVE,
    "aten::all": NATIVE,
    "aten::amax": NATIVE,
    "aten::amin": NATIVE,
    "aten::any": NATIVE,
    "aten::arange": NATIVE,
    "aten::argsort": CPU_FALLBACK,  # stable overload computed on the host (csrc/aten/TensorShape.cpp)
    "aten::as_strided": NATIVE,
    "aten::batch_norm_backward_elemt": NATIVE,
    "aten::batch_norm_backward_reduce": NATIVE,
    "aten::batch_norm_elemt": NATIVE,
    "aten::batch_norm_gather_stats_with_counts": NATIVE,
    "aten::batch_norm_stats": NATIVE,
    "aten::bernoulli": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::bernoulli_": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::bitwise_and": NATIVE,
    "aten::bitwise_left_shift": NATIVE,
    "aten::bitwise_not": NATIVE,
    "aten::bitwise_or": NATIVE,
    "aten::bitwise_right_shift": NATIVE,
    "aten::bitwise_xor": NATIVE,
    "aten::bmm": NATIVE,
    "aten::cat": NATIVE,
    "aten::cauchy_": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::ceil": NATIVE,
    "aten::cholesky_inverse": CPU_FALLBACK,  # explicitly routed to the host (cpu_fallback_registrations.py)
    "aten::clamp": NATIVE,
    "aten::clamp_max": NATIVE,
    "aten::clamp_min": NATIVE,
    "aten::clone": NATIVE,
    "aten::constant_pad_nd": NATIVE,
    "aten::contiguous": NATIVE,  # marked implemented only in docs/ops.html
    "aten::convolution": NATIVE,
    "aten::convolution_backward": NATIVE,
    "aten::copy_": NATIVE,
    "aten::cos": NATIVE,
    "aten::cumsum": NATIVE,
    "aten::div": NATIVE,
    "aten::div_": NATIVE,
    "aten::dot": NATIVE,
    "aten::embedding": NATIVE,
    "aten::embedding_dense_backward": NATIVE,
    "aten::empty": NATIVE,
    "aten::empty_strided": NATIVE,
    "aten::eq": NATIVE,
    "aten::erf": NATIVE,
    "aten::erfinv": NATIVE,
    "aten::exp": NATIVE,
    "aten::exponential_": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::eye": NATIVE,
    "aten::fill_": NATIVE,
    "aten::flip": NATIVE,
    "aten::floor_divide": NATIVE,
    "aten::full": NATIVE,
    "aten::gather": NATIVE,
    "aten::ge": NATIVE,
    "aten::gelu": NATIVE,
    "aten::gelu_": NATIVE,
    "aten::gelu_backward": NATIVE,
    "aten::geometric_": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::gt": NATIVE,
    "aten::histc": NATIVE,
    "aten::index": NATIVE,
    "aten::index_add": NATIVE,
    "aten::index_add_": NATIVE,
    "aten::index_copy": NATIVE,
    "aten::index_copy_": NATIVE,
    "aten::index_select": NATIVE,
    "aten::index_select_backward": NATIVE,
    "aten::isfinite": NATIVE,
    "aten::isinf": NATIVE,
    "aten::isnan": NATIVE,
    "aten::isneginf": NATIVE,
    "aten::le": NATIVE,
    "aten::lerp": NATIVE,
    "aten::lerp_": NATIVE,
    "aten::linalg_cholesky_ex": CPU_FALLBACK,  # explicitly routed to the host (cpu_fallback_registrations.py)
    "aten::linalg_inv_ex": CPU_FALLBACK,  # explicitly routed to the host (cpu_fallback_registrations.py)
    "aten::linalg_ldl_factor_ex": CPU_FALLBACK,  # explicitly routed to the host (cpu_fallback_registrations.py)
    "aten::linalg_lu_factor_ex": CPU_FALLBACK,  # explicitly routed to the host (cpu_fallback_registrations.py)
    "aten::linalg_qr": CPU_FALLBACK,  # explicitly routed to the host (cpu_fallback_registrations.py)
    "aten::linalg_vector_norm": NATIVE,
    "aten::linear": NATIVE,
    "aten::linear_backward": NATIVE,
    "aten::log": NATIVE,
    "aten::log_normal_": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::log_softmax": NATIVE,
    "aten::logical_and": NATIVE,
    "aten::logical_not": NATIVE,
    "aten::logical_or": NATIVE,
    "aten::logical_xor": NATIVE,
    "aten::lt": NATIVE,
    "aten::masked_fill": NATIVE,
    "aten::masked_fill_": NATIVE,
    "aten::masked_select": NATIVE,
    "aten::max": NATIVE,
    "aten::mean": NATIVE,
    "aten::mm": NATIVE,
    "aten::mul": NATIVE,
    "aten::mul_": NATIVE,
    "aten::multinomial": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::mv": NATIVE,
    "aten::native_dropout": NATIVE,  # keep-mask drawn with host RNG, then applied on device
    "aten::native_dropout_backward": NATIVE,
    "aten::native_layer_norm": NATIVE,
    "aten::native_layer_norm_backward": NATIVE,
    "aten::ne": NATIVE,
    "aten::neg": NATIVE,
    "aten::neg_": NATIVE,  # marked implemented only in docs/ops.html
    "aten::new_empty": NATIVE,
    "aten::nll_loss_backward": NATIVE,
    "aten::nll_loss_forward": NATIVE,
    "aten::nonzero": NATIVE,
    "aten::nonzero_static": NATIVE,
    "aten::normal": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::normal_": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::one_hot": NATIVE,
    "aten::ones": NATIVE,
    "aten::ones_like": NATIVE,
    "aten::poisson": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::pow": NATIVE,
    "aten::rand": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::rand_like": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::randint": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::randint_like": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::randn": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::randn_like": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::random_": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::randperm": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::reciprocal": NATIVE,
    "aten::reciprocal_": NATIVE,
    "aten::reflection_pad1d": NATIVE,
    "aten::reflection_pad2d": NATIVE,
    "aten::reflection_pad3d": NATIVE,
    "aten::relu": NATIVE,
    "aten::relu_": NATIVE,
    "aten::remainder": NATIVE,
    "aten::repeat": NATIVE,
    "aten::repeat_interleave": NATIVE,
    "aten::replication_pad1d": NATIVE,
    "aten::replication_pad2d": NATIVE,
    "aten::replication_pad3d": NATIVE,
    "aten::resize_": NATIVE,
    "aten::rms_norm": NATIVE,  # registered only for torch >= 2.9
    "aten::rsqrt": NATIVE,
    "aten::scalar_tensor": NATIVE,
    "aten::scatter": NATIVE,
    "aten::scatter_": NATIVE,  # marked implemented only in docs/ops.html
    "aten::scatter_add": NATIVE,
    "aten::scatter_add_": NATIVE,
    "aten::select_backward": CPU_FALLBACK,  # C++ kernel computes on the host (csrc/aten/TensorShape.cpp)
    "aten::set_": NATIVE,
    "aten::sgn": NATIVE,
    "aten::sigmoid": NATIVE,
    "aten::sigmoid_backward": NATIVE,
    "aten::sign": NATIVE,
    "aten::signbit": NATIVE,
    "aten::silu": NATIVE,
    "aten::silu_backward": NATIVE,
    "aten::sin": NATIVE,
    "aten::slice_backward": NATIVE,  # MLIR kernel; a host-side C++ variant also exists in csrc/aten/TensorShape.cpp
    "aten::softmax": NATIVE,
    "aten::softplus": NATIVE,
    "aten::softplus_backward": NATIVE,
    "aten::sqrt": NATIVE,
    "aten::sqrt_": NATIVE,  # marked implemented only in docs/ops.html
    "aten::stack": NATIVE,
    "aten::sub": NATIVE,
    "aten::sub_": NATIVE,
    "aten::sum": NATIVE,
    "aten::tanh": NATIVE,
    "aten::tanh_backward": NATIVE,
    "aten::threshold": NATIVE,
    "aten::threshold_backward": NATIVE,
    "aten::topk": NATIVE,
    "aten::triangular_solve": CPU_FALLBACK,  # explicitly routed to the host (cpu_fallback_registrations.py)
    "aten::tril": NATIVE,
    "aten::triu": NATIVE,
    "aten::trunc": NATIVE,
    "aten::unfold": NATIVE,
    "aten::uniform_": CPU_FALLBACK,  # RNG: no device RNG, no Neuron kernel in the snapshot
    "aten::upsample_bicubic2d": CPU_FALLBACK,  # no Neuron kernel in the snapshot; unimplemented in docs/ops.html
    "aten::upsample_bicubic2d_backward": CPU_FALLBACK,  # no Neuron kernel in the snapshot; unimplemented in docs/ops.html
    "aten::upsample_bilinear2d": CPU_FALLBACK,  # no Neuron kernel in the snapshot; unimplemented in docs/ops.html
    "aten::upsample_bilinear2d_backward": CPU_FALLBACK,  # no Neuron kernel in the snapshot; unimplemented in docs/ops.html
    "aten::value_selecting_reduction_backward": NATIVE,
    "aten::view": NATIVE,
    "aten::where": NATIVE,
    "aten::zero_": NATIVE,
    "aten::zeros": NATIVE,
}

# dtypes that a native op does not cover, so they run as CPU fallback (only where the source says so)
DTYPE_EXCEPTIONS = {}
