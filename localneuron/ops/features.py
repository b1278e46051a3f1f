"""The errors for features Neuron does not have (the ops that raise them are marked in op_records.py).

Layouts that never reach here (sparse and nested tensors on the device, forward-mode AD) are refused in the C++
core (csrc/aten/kernels.cpp), which also refuses channels-last contiguous() as TorchNeuron does and runs the
channels-last _to_copy its Neuron implementation refuses as a CPU fallback.
"""
SPARSE = "Sparse tensors are not supported on the neuron device. Keep sparse tensors on the CPU, or use dense tensors."
NESTED = "Nested tensors are not supported on the neuron device. Pad the sequences into a dense tensor instead."
TRANSFORMER_FAST_PATH = ("Nested tensors are not supported on the neuron device, and nn.TransformerEncoder builds "
                         "them on its inference fast path (eval mode with a src_key_padding_mask). Construct it with "
                         "nn.TransformerEncoder(..., enable_nested_tensor=False): the results are the same.")
MKLDNN = "MKLDNN tensors are a CPU layout and do not exist on the neuron device."
QUANTIZED = "Quantized tensors (torch.quantize_per_tensor etc.) are not supported on the neuron device; use bf16/fp8 dtypes."
