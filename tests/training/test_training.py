"""Training on the device: autograd, modules, optimizers, state dicts, save/load and seeding."""
import io

import pytest
import torch
import torch.nn as nn


def make_model():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 3))


@pytest.mark.parametrize("optimizer_class", [torch.optim.SGD, torch.optim.Adam, torch.optim.AdamW])
def test_training_steps_match_cpu(optimizer_class):
    torch.manual_seed(1)
    x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
    results = []
    for device in ("cpu", "neuron"):
        model = make_model().to(device)
        kwargs = {"lr": 0.1, "momentum": 0.9} if optimizer_class is torch.optim.SGD else {"lr": 1e-2}
        optimizer = optimizer_class(model.parameters(), **kwargs)
        losses = []
        for _ in range(5):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x.to(device)), y.to(device))
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
        results.append((losses, [p.detach().cpu() for p in model.parameters()]))
    (cpu_losses, cpu_params), (dev_losses, dev_params) = results
    assert dev_losses == pytest.approx(cpu_losses, abs=1e-5)
    for c, d in zip(cpu_params, dev_params):
        torch.testing.assert_close(d, c, atol=1e-5, rtol=1e-5)


def test_foreach_optimizer_path_is_used_on_the_device(tracking):
    model = make_model().to("neuron")
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)  # foreach is the default for neuron
    model(torch.randn(4, 8).neuron()).sum().backward()
    optimizer.step()
    assert any(op.startswith("aten::_foreach_") for op in tracking.get_executed_ops())


def test_gradients_match_cpu():
    x = torch.randn(5, 3, requires_grad=True)
    xn = x.detach().neuron().requires_grad_()
    for t in (x, xn):
        (t.sin() * t.exp()).sum().backward()
    torch.testing.assert_close(xn.grad.cpu(), x.grad)
    assert xn.grad.device.type == "neuron"


def test_module_to_and_back_and_state_dict():
    model = make_model()
    reference = {k: v.clone() for k, v in model.state_dict().items()}
    model.to("neuron")
    assert all(p.device.type == "neuron" for p in model.parameters())
    state = model.state_dict()
    assert all(v.device.type == "neuron" for v in state.values())
    model.to("cpu")
    for k, v in model.state_dict().items():
        assert torch.equal(v, reference[k])
    param = nn.Parameter(torch.ones(3))
    param.data = torch.zeros(3, device="neuron")  # needs the compatible-shallow-copy override
    assert param.device.type == "neuron"


def test_save_and_load_with_weights_only_and_map_location():
    model = make_model().to("neuron:1")
    buffer = io.BytesIO()
    torch.save(model.state_dict(), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)  # weights_only=True is the default
    assert all(v.device == torch.device("neuron:1") for v in loaded.values())
    buffer.seek(0)
    on_cpu = torch.load(buffer, map_location="cpu")
    assert all(v.device.type == "cpu" for v in on_cpu.values())
    cpu_buffer = io.BytesIO()
    torch.save(on_cpu, cpu_buffer)
    cpu_buffer.seek(0)
    moved = torch.load(cpu_buffer, map_location="neuron:2")
    assert all(v.device == torch.device("neuron:2") for v in moved.values())
    for k in on_cpu:
        assert torch.equal(moved[k].cpu(), on_cpu[k])


def test_manual_seed_makes_device_randomness_reproducible(quiet):
    def run():
        torch.manual_seed(42)
        layer = nn.Dropout(0.5).train()
        x = torch.ones(1000, device="neuron")
        return torch.rand(4, device="neuron").cpu(), layer(x).cpu()

    (r1, d1), (r2, d2) = run(), run()
    assert torch.equal(r1, r2) and torch.equal(d1, d2)
    assert 300 < int((d1 == 0).sum()) < 700
