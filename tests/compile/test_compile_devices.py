"""Where compiled graphs take their inputs from and put their outputs (docs/support-matrix.md#torchcompile): CPU inputs
are copied to the device, TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY makes them an error, and
TORCH_NEURONX_RETAIN_DEVICE_MODE returns outputs on the inputs' device."""
import pytest
import torch
from compile_models import compile_cache, mlp  # noqa: F401

pytestmark = pytest.mark.usefixtures("compile_cache")


@pytest.fixture(autouse=True)
def fresh_dynamo():
    torch._dynamo.reset()
    yield


def scaled(x):
    return x * 3 - torch.ones(x.shape, device=x.device)


def test_cpu_inputs_are_copied_to_the_device_and_gradients_reach_cpu_parameters():
    torch.manual_seed(0)
    model = mlp()
    x = torch.randn(5, 8)
    out = torch.compile(model, backend="neuron")(x)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), model(x), rtol=1e-4, atol=1e-5)
    out.sum().backward()
    grad = model[0].weight.grad.clone()
    model.zero_grad()
    model(x).sum().backward()
    torch.testing.assert_close(grad, model[0].weight.grad, rtol=1e-4, atol=1e-5)


def test_disabled_autocopy_rejects_cpu_inputs(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", "1")
    with pytest.raises(Exception, match=r"Input tensor at index 0 is on cpu device, expected neuron"):
        torch.compile(scaled, backend="neuron")(torch.randn(4))


def test_retain_device_mode_returns_cpu_outputs_for_cpu_inputs(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_RETAIN_DEVICE_MODE", "1")
    x = torch.randn(4)
    out = torch.compile(scaled, backend="neuron")(x)
    assert out.device.type == "cpu"
    torch.testing.assert_close(out, scaled(x))


def test_retain_device_mode_rejects_mixed_input_devices(monkeypatch):
    monkeypatch.setenv("TORCH_NEURONX_RETAIN_DEVICE_MODE", "1")
    with pytest.raises(Exception, match="cannot mix input devices with TORCH_NEURONX_RETAIN_DEVICE_MODE=1"):
        torch.compile(lambda a, b: a.sum() + b.sum(), backend="neuron")(torch.randn(3), torch.randn(3, device="neuron"))
