"""linear as TorchNeuron runs it: one tracked op (aten::linear) whose backward is one op too (aten::linear_backward),
with the CPU's values and gradients, in every autograd situation (partial requires_grad, retained graphs, double
backward, no_grad, autocast); traced or transformed calls (dispatch modes, torch.compile) keep PyTorch's composite.
aten::linear_backward called directly runs on the device too (PyTorch's only kernel is MKLDNN's): for every
output_mask it returns the gradients CPU autograd gives for linear, and None for the others."""
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


# -- linear as one op, whose backward is linear_backward (csrc/aten/linear.cpp) --

def _executed(tracking, fn):
    tracking.clear_op_tracking()
    result = fn()
    torch.neuron.synchronize()
    return result, set(tracking.get_executed_ops())


@pytest.mark.parametrize("with_bias", (True, False))
@pytest.mark.parametrize("shape", SHAPES)
def test_forward_runs_as_one_tracked_op_with_the_cpus_values(shape, with_bias, tracking):
    generator = torch.Generator().manual_seed(7)
    x, weight = torch.randn(*shape, generator=generator), torch.randn(5, 4, generator=generator)
    bias = torch.randn(5, generator=generator) if with_bias else None
    args = [x.neuron(), weight.neuron(), bias.neuron() if with_bias else None]
    result, executed = _executed(tracking, lambda: F.linear(*args))
    assert "aten::linear" in executed
    assert not {"aten::addmm", "aten::mm", "aten::matmul", "aten::t"} & executed  # not its decomposition
    assert result.device.type == "neuron"
    torch.testing.assert_close(result.cpu(), F.linear(x, weight, bias))


@pytest.mark.parametrize("requires", [(True, True, True), (True, False, False), (False, True, False),
                                      (False, False, True), (True, True, False)])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4)])
def test_backward_is_linear_backward_with_the_gradients_cpu_autograd_gives(shape, requires, tracking):
    generator = torch.Generator().manual_seed(3)
    cpu = [torch.randn(*shape, generator=generator), torch.randn(5, 4, generator=generator),
           torch.randn(5, generator=generator)]
    grad_output = torch.randn(*shape[:-1], 5, generator=generator)
    dev = [t.neuron().requires_grad_(r) for t, r in zip(cpu, requires)]
    cpu = [t.clone().requires_grad_(r) for t, r in zip(cpu, requires)]
    F.linear(*cpu).backward(grad_output)
    _, executed = _executed(tracking, lambda: F.linear(*dev).backward(grad_output.neuron()))
    assert {"aten::linear", "aten::linear_backward"} <= executed
    assert tracking.get_fallback_ops() == []
    for d, c in zip(dev, cpu):
        if c.grad is None:
            assert d.grad is None  # a gradient nobody asked for is not computed
        else:
            assert d.grad.device.type == "neuron"
            torch.testing.assert_close(d.grad.cpu(), c.grad)


def test_module_training_step_matches_cpu_and_keeps_the_graph_for_a_second_backward(tracking):
    torch.manual_seed(0)
    cpu = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    dev = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    dev.load_state_dict(cpu.state_dict())
    dev.to("neuron")
    x = torch.randn(4, 6)
    for model, data in ((cpu, x), (dev, x.neuron())):
        loss = model(data).pow(2).sum()
        loss.backward(retain_graph=True)
        loss.backward()  # the saved tensors outlive the first backward
    for c, d in zip(cpu.parameters(), dev.parameters()):
        torch.testing.assert_close(d.grad.cpu(), c.grad)


def test_double_backward_matches_cpu():
    """create_graph=True: the gradients are built from differentiable ops, so a gradient penalty works."""
    generator = torch.Generator().manual_seed(5)
    x, weight, bias = torch.randn(3, 4, generator=generator), torch.randn(5, 4, generator=generator), torch.randn(5)
    results = []
    for tensors in ((x, weight, bias), (x.neuron(), weight.neuron(), bias.neuron())):
        x_, w_, b_ = (t.clone().requires_grad_() for t in tensors)
        (grad_x,) = torch.autograd.grad(F.linear(x_, w_, b_).tanh().sum(), x_, create_graph=True)
        grad_x.pow(2).sum().backward()
        results.append((grad_x.detach(), w_.grad))
    for d, c in zip(results[1], results[0]):
        torch.testing.assert_close(d.cpu(), c)


def test_without_grad_the_forward_keeps_no_graph(tracking):
    weight = torch.randn(5, 4, device="neuron", requires_grad=True)
    x = torch.randn(3, 4, device="neuron")
    with torch.no_grad():
        assert F.linear(x, weight).grad_fn is None
    with torch.inference_mode():
        result, executed = _executed(tracking, lambda: F.linear(x, weight))
    assert "aten::linear" in executed and result.grad_fn is None


def test_autocast_runs_it_in_bfloat16_with_float32_gradients():
    torch.manual_seed(1)
    layer = torch.nn.Linear(4, 5).to("neuron")
    x = torch.randn(3, 4, device="neuron")
    with torch.autocast("neuron", dtype=torch.bfloat16):
        out = layer(x)
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert layer.weight.grad.dtype == torch.float32
    torch.testing.assert_close(layer.weight.grad.cpu(), torch.ones(3, 5).t() @ x.cpu(), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("shapes", [((4,), (4,)), ((3, 4), (4,)), ((4,), (2, 4))])
def test_vector_operands_run_whole_and_a_vector_weight_keeps_the_composites_gradients(shapes, tracking):
    x, weight = torch.randn(shapes[0]), torch.randn(shapes[1], requires_grad=True)
    result, executed = _executed(tracking, lambda: F.linear(x.neuron(), weight.detach().neuron()))
    assert "aten::linear" in executed
    torch.testing.assert_close(result.cpu(), F.linear(x, weight).detach())
    dev_weight = weight.detach().neuron().requires_grad_()
    F.linear(x.neuron(), dev_weight).sum().backward()
    F.linear(x, weight).sum().backward()
    torch.testing.assert_close(dev_weight.grad.cpu(), weight.grad)


def test_a_broadcast_bias_gets_a_gradient_of_its_own_shape():
    x, weight, bias = torch.randn(3, 4), torch.randn(5, 4), torch.randn(1, requires_grad=True)
    dev_bias = bias.detach().neuron().requires_grad_()
    F.linear(x.neuron(), weight.neuron().requires_grad_(), dev_bias).sum().backward()
    F.linear(x, weight, bias).sum().backward()
    assert dev_bias.grad.shape == (1,)
    torch.testing.assert_close(dev_bias.grad.cpu(), bias.grad)


def test_dispatch_modes_and_tracing_see_pytorchs_decomposition():
    """Under a __torch_dispatch__ mode (as torch.compile's tracing, FlopCounter or DTensor see it) linear is
    PyTorch's composite, with the same ops as on every other device."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func.overloadpacket))
            return func(*args, **(kwargs or {}))

    weight = torch.randn(5, 4, device="neuron", requires_grad=True)
    with Recorder() as recorder:
        F.linear(torch.randn(3, 4, device="neuron"), weight).sum().backward()
    assert "aten.linear" not in recorder.ops and "aten.linear_backward" not in recorder.ops
    assert "aten.mm" in recorder.ops


def test_compiled_linear_trains_like_cpu():
    torch.manual_seed(2)
    cpu = torch.nn.Linear(4, 3)
    dev = torch.nn.Linear(4, 3)
    dev.load_state_dict(cpu.state_dict())
    dev.to("neuron")
    compiled = torch.compile(dev, backend="neuron")
    x = torch.randn(2, 4)
    compiled(x.neuron()).pow(2).sum().backward()
    cpu(x).pow(2).sum().backward()
    torch.testing.assert_close(dev.weight.grad.cpu(), cpu.weight.grad)


def test_mixed_devices_are_refused_as_on_cuda():
    with pytest.raises(RuntimeError, match="(?i)device"):
        F.linear(torch.randn(3, 4), torch.randn(5, 4, device="neuron", requires_grad=True))
