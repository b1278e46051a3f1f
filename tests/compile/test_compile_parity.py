"""Compiled training on the neuron device matches eager training on the CPU: forward, backward and
several optimizer steps, including in-place updates of parameters and BatchNorm statistics."""
import pytest
import torch
import torch.nn.functional as F
from compile_models import ConvBN, TinyTransformer, compile_cache, mlp  # noqa: F401

pytestmark = pytest.mark.usefixtures("compile_cache")
STEPS = 3


def adamw(params):
    return torch.optim.AdamW(params, lr=0.01)


def sgd(params):
    # Where a gradient is pure rounding noise (the attention key bias has exactly-zero gradients in
    # theory), AdamW scales the noise up to full steps; SGD with momentum keeps the comparison tight.
    return torch.optim.SGD(params, lr=0.05, momentum=0.9)


def train(make_model, batches, loss_fn, device: str, compiled: bool, make_optimizer, compile_step: bool = False):
    torch.manual_seed(0)
    model = make_model().to(device)
    optimizer = make_optimizer(model.parameters())
    forward = torch.compile(model, backend="neuron") if compiled else model
    step = torch.compile(optimizer.step, backend="neuron") if compile_step else optimizer.step
    losses = []
    for x, y in batches:
        optimizer.zero_grad()
        loss = loss_fn(forward(x.to(device)), y.to(device))
        loss.backward()
        step()
        losses.append(loss.detach().cpu())
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    return torch.stack(losses), state


def assert_parity(make_model, batches, loss_fn, make_optimizer=sgd, compile_step: bool = False):
    ref_losses, ref_state = train(make_model, batches, loss_fn, "cpu", False, make_optimizer)
    losses, state = train(make_model, batches, loss_fn, "neuron", True, make_optimizer, compile_step)
    torch.testing.assert_close(losses, ref_losses, rtol=1e-4, atol=1e-5)
    for name, value in ref_state.items():
        torch.testing.assert_close(state[name], value, rtol=1e-4, atol=1e-5, msg=name)


def test_mlp_training_matches_eager_cpu_with_a_compiled_optimizer_step():
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(5, 8, generator=g), torch.randn(5, 4, generator=g)) for _ in range(STEPS)]
    assert_parity(mlp, batches, F.mse_loss, adamw, compile_step=True)


def test_transformer_training_matches_eager_cpu():
    g = torch.Generator().manual_seed(2)
    batches = [(torch.randint(0, 32, (2, 6), generator=g), torch.randint(0, 32, (2, 6), generator=g))
               for _ in range(STEPS)]
    assert_parity(TinyTransformer, batches, lambda out, y: F.cross_entropy(out.flatten(0, 1), y.flatten()))


def test_conv_batchnorm_training_matches_eager_cpu_including_running_statistics():
    g = torch.Generator().manual_seed(3)
    batches = [(torch.randn(2, 3, 6, 6, generator=g), torch.randint(0, 2, (2,), generator=g)) for _ in range(STEPS)]
    assert_parity(ConvBN, batches, F.cross_entropy)


def test_compiled_outputs_are_neuron_tensors_and_inference_mutates_buffers_in_place():
    torch.manual_seed(0)
    model = ConvBN().to("neuron")
    x = torch.randn(2, 3, 6, 6)
    with torch.no_grad():
        out = torch.compile(model, backend="neuron")(x.to("neuron"))
    torch.manual_seed(0)
    ref = ConvBN()
    with torch.no_grad():
        expected = ref(x)
    assert out.device.type == "neuron"
    torch.testing.assert_close(out.cpu(), expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(model.bn.running_mean.cpu(), ref.bn.running_mean)


def test_views_of_inputs_and_in_place_input_mutations():
    def f(x, buf):
        buf.add_(x.sum(0))   # mutates a graph input (the optimizer/buffer pattern)
        x[0].mul_(2)         # mutates a view of an input
        return x.t(), buf * 1  # returns a view of an input

    x, buf = torch.randn(3, 4), torch.zeros(4)
    dx, dbuf = x.to("neuron"), buf.to("neuron")
    view, copy = torch.compile(f, backend="neuron")(dx, dbuf)
    ref_view, ref_copy = f(x, buf)
    torch.testing.assert_close(dx.cpu(), x)
    torch.testing.assert_close(dbuf.cpu(), buf)
    torch.testing.assert_close(view.cpu(), ref_view)
    torch.testing.assert_close(copy.cpu(), ref_copy)
    view.mul_(0)  # the returned view still aliases the device input
    assert dx.abs().sum().item() == 0
