"""Ops that reach the device for features Neuron does not have; each gets a clear error.

Layouts that never reach here (sparse and nested tensors on the device, forward-mode AD, channels_last)
are refused in the C++ core (csrc/kernels.cpp).
"""
SPARSE = "Sparse tensors are not supported on the neuron device. Keep sparse tensors on the CPU, or use dense tensors."
NESTED = "Nested tensors are not supported on the neuron device. Pad the sequences into a dense tensor instead."
TRANSFORMER_FAST_PATH = ("Nested tensors are not supported on the neuron device, and nn.TransformerEncoder builds "
                         "them on its inference fast path (eval mode with a src_key_padding_mask). Construct it with "
                         "nn.TransformerEncoder(..., enable_nested_tensor=False): the results are the same.")
MKLDNN = "MKLDNN tensors are a CPU layout and do not exist on the neuron device."
QUANTIZED = "Quantized tensors (torch.quantize_per_tensor etc.) are not supported on the neuron device; use bf16/fp8 dtypes."

# op -> why it cannot run on Neuron
UNSUPPORTED = {
    "aten::_nested_from_padded": NESTED,
    "aten::_nested_tensor_from_mask": TRANSFORMER_FAST_PATH,
    "aten::_nested_tensor_from_tensor_list": NESTED,
    "aten::_to_sparse": SPARSE,
    "aten::_to_sparse_bsc": SPARSE,
    "aten::_to_sparse_bsr": SPARSE,
    "aten::_to_sparse_csc": SPARSE,
    "aten::_to_sparse_csr": SPARSE,
    "aten::quantize_per_channel": QUANTIZED,
    "aten::quantize_per_tensor": QUANTIZED,
    "aten::to_mkldnn": MKLDNN,
    "aten::to_sparse": SPARSE,
    "aten::to_sparse_csr": SPARSE,
}
