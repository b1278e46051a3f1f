"""aten::linear_backward called directly runs on the device, as TorchNeuron registers it (PyTorch's only kernel is
MKLDNN's): for every output_mask it returns the gradients CPU autograd gives for linear, and None for the others."""
import itertools

import pytest
import torch
import torch.nn.functional as F

MASKS = [mask for mask in itertools.product((True, False), repeat=3) if any(mask)]
SHAPES = [(4,), (3, 4), (2, 3, 4)]  # the input's: a vector, a matrix, a batch of matrices
TOLERANCES = {torch.float32: {}, torch.bfloat16: {"rtol": 2e-2, "atol": 2e-2}}


def _cpu_gradients(x, weight, bias, grad_output):
    x, weight = x.clone().requires_grad_(), weight.clone().requires_grad_()
    bias = bias.clone().requires_grad_() if bias is not None else None
    F.linear(x, weight, bias).backward(grad_output)
    return x.grad, weight.grad, bias.grad if bias is not None else grad_output.reshape(-1, weight.shape[0]).sum(0)


@pytest.mark.parametrize("dtype", TOLERANCES)
@pytest.mark.parametrize("with_bias", (True, False))
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("mask", MASKS)
def test_linear_backward_matches_cpu_autograd(mask, shape, with_bias, dtype, tracking):
    generator = torch.Generator().manual_seed(len(shape))
    x = torch.randn(*shape, generator=generator).to(dtype)
    weight = torch.randn(5, 4, generator=generator).to(dtype)
    bias = torch.randn(5, generator=generator).to(dtype) if with_bias else None
    grad_output = torch.randn(*shape[:-1], 5, generator=generator).to(dtype)
    expected = _cpu_gradients(x, weight, bias, grad_output)
    results = torch.ops.aten.linear_backward(x.neuron(), grad_output.neuron(), weight.neuron(), list(mask))
    for wanted, result, want in zip(mask, results, expected):
        if wanted:
            assert result.device.type == "neuron" and result.dtype == dtype
            torch.testing.assert_close(result.cpu(), want, **TOLERANCES[dtype])
        else:
            assert result is None
    assert tracking.get_fallback_ops() == []  # computed by device ops, nothing copied to the host
