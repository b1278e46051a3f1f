"""Channels-last memory formats, as TorchNeuron runs them: empty, empty_like, clone and resize_ keep the format on the
device; contiguous refuses it (its C++ contiguous raises); _to_copy's Neuron implementation refuses it, so the call runs
as a CPU fallback (warned, listed), or raises TorchNeuron's error under
TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS=1. Every result has the CPU's values and strides."""
import warnings

import pytest
import torch

import torch_neuronx
from localneuron.ops import tracking
from localneuron.runtime.environment import ConfigurationError

ONLY_UNIMPLEMENTED = "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"
FORMATS = {4: torch.channels_last, 5: torch.channels_last_3d}
REFUSED = "Neuron tensors only support contiguous or preserve memory format"


def shape(rank):
    return (2, 3, 4, 5) if rank == 4 else (2, 3, 4, 5, 6)


def cpu_and_neuron(rank):
    x = torch.randn(shape(rank), generator=torch.Generator().manual_seed(rank))
    return x, x.to("neuron")


def same_layout_and_values(got, want):
    assert got.device.type == "neuron"
    assert got.shape == want.shape and got.stride() == want.stride(), (got.stride(), want.stride())
    torch.testing.assert_close(got.cpu(), want, rtol=0, atol=0)


@pytest.fixture
def fallback_allowed(monkeypatch):
    monkeypatch.delenv(ONLY_UNIMPLEMENTED, raising=False)
    monkeypatch.setattr(tracking, "_warned", set())  # each test sees the once-per-process warning


@pytest.mark.parametrize("rank", sorted(FORMATS))
def test_allocation_clone_and_resize_keep_the_format_on_the_device(rank, fallback_allowed):
    memory_format = FORMATS[rank]
    x, d = cpu_and_neuron(rank)
    torch_neuronx.clear_op_tracking()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # none of these is a fallback
        empty = torch.empty(shape(rank), device="neuron", memory_format=memory_format)
        like = torch.empty_like(d, memory_format=memory_format)
        cloned = d.clone(memory_format=memory_format)
        resized = torch.empty(shape(rank), device="neuron").resize_(tuple(n + 1 for n in shape(rank)),
                                                                    memory_format=memory_format)
    for t, want in ((empty, torch.empty(shape(rank), memory_format=memory_format)),
                    (like, torch.empty_like(x, memory_format=memory_format)),
                    (resized, torch.empty(shape(rank)).resize_(tuple(n + 1 for n in shape(rank)),
                                                               memory_format=memory_format))):
        assert t.is_contiguous(memory_format=memory_format) and t.stride() == want.stride()
    same_layout_and_values(cloned, x.clone(memory_format=memory_format))
    assert cloned.data_ptr() != d.data_ptr()
    executed = torch_neuronx.get_executed_ops()
    assert {"aten::clone", "aten::resize_", "aten::empty.memory_format"} <= set(executed), executed
    assert torch_neuronx.get_fallback_ops() == []


@pytest.mark.parametrize("rank", sorted(FORMATS))
@pytest.mark.parametrize("op", ["to", "to from the host"])
def test_to_copy_runs_a_channels_last_request_as_a_cpu_fallback(rank, op, fallback_allowed):
    memory_format = FORMATS[rank]
    x, d = cpu_and_neuron(rank)
    run = {"to": lambda t: t.to(memory_format=memory_format),
           "to from the host": lambda t: x.to(t.device, memory_format=memory_format)}[op]
    torch_neuronx.clear_op_tracking()
    with pytest.warns(UserWarning, match="Operator 'aten::_to_copy' executed via CPU fallback"):
        got = run(d)
    assert torch_neuronx.get_fallback_ops() == ["aten::_to_copy"]
    assert "aten::_to_copy" not in torch_neuronx.get_executed_ops()  # (read before .cpu(), itself an _to_copy)
    same_layout_and_values(got, run(x))
    run(d)
    assert torch_neuronx.get_fallback_ops() == ["aten::_to_copy"]  # each call is a fallback; the list holds names
    torch_neuronx.clear_op_tracking()
    assert torch_neuronx.get_fallback_ops() == []


@pytest.mark.parametrize("rank", sorted(FORMATS))
@pytest.mark.parametrize("fallback_only", [None, "1"])
def test_contiguous_refuses_a_channels_last_request(rank, fallback_only, monkeypatch):
    """TorchNeuron's contiguous raises the refusal itself, whether or not the CPU fallback is allowed; a tensor that
    requires grad is refused alike, and the device stays usable."""
    memory_format = FORMATS[rank]
    if fallback_only:
        monkeypatch.setenv(ONLY_UNIMPLEMENTED, fallback_only)
    else:
        monkeypatch.delenv(ONLY_UNIMPLEMENTED, raising=False)
    _, d = cpu_and_neuron(rank)
    for t in (d, d.clone().requires_grad_()):
        with pytest.raises(RuntimeError, match=f"aten::contiguous: {REFUSED}"):
            t.contiguous(memory_format=memory_format)
    assert (d.contiguous() + 1).shape == d.shape


def test_the_contiguous_and_preserve_formats_stay_on_the_device(fallback_allowed):
    x, d = cpu_and_neuron(4)
    t = d.transpose(1, 3)
    torch_neuronx.clear_op_tracking()
    same_layout_and_values(t.contiguous(), x.transpose(1, 3).contiguous())
    same_layout_and_values(t.contiguous(memory_format=torch.preserve_format), x.transpose(1, 3).contiguous())
    same_layout_and_values(d.to(memory_format=torch.contiguous_format), x)
    assert torch_neuronx.get_fallback_ops() == []


@pytest.mark.parametrize("rank", sorted(FORMATS))
def test_fallback_disabled_makes_the_refusal_torchneurons_error(rank, monkeypatch):
    """Read at each call, as TorchNeuron's tests set it inside a test."""
    memory_format = FORMATS[rank]
    x, d = cpu_and_neuron(rank)
    d.to(memory_format=memory_format)  # the same call, allowed first: nothing about it is kept
    monkeypatch.setenv(ONLY_UNIMPLEMENTED, "1")
    for call, name in ((lambda: d.to(memory_format=memory_format), "aten::_to_copy"),
                       (lambda: x.to("neuron", memory_format=memory_format), "aten::_to_copy")):
        with pytest.raises(RuntimeError, match=rf"CPU fallback disabled because {ONLY_UNIMPLEMENTED}=1\. Operation "
                                               rf"{name} failed to execute on Neuron .*{REFUSED}"):
            call()
    same_layout_and_values(d.clone(memory_format=memory_format), x.clone(memory_format=memory_format))
    monkeypatch.setenv(ONLY_UNIMPLEMENTED, "perhaps")
    with pytest.raises(ConfigurationError, match=f"{ONLY_UNIMPLEMENTED}='perhaps' is not valid"):
        d.to(memory_format=memory_format)


def test_gradients_flow_through_a_channels_last_to(fallback_allowed):
    x, d = cpu_and_neuron(4)
    weights = torch.randn(shape(4), generator=torch.Generator().manual_seed(9))
    grads = []
    for t, w in ((x, weights), (d, weights.to("neuron"))):
        leaf = t.clone().requires_grad_()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = leaf.to(memory_format=torch.channels_last)
        assert y.is_contiguous(memory_format=torch.channels_last)
        (y * w).sum().backward()
        grads.append(leaf.grad)
    torch.testing.assert_close(grads[1].cpu(), grads[0], rtol=0, atol=0)


def test_ops_on_channels_last_device_tensors_give_the_cpus_layout(fallback_allowed):
    x, d = cpu_and_neuron(4)
    xc, dc = x.clone(memory_format=torch.channels_last), d.clone(memory_format=torch.channels_last)
    weight = torch.randn(4, 3, 3, 3, generator=torch.Generator().manual_seed(3))
    for f in (lambda t: t * 2 + 1, torch.sigmoid,
              lambda t: torch.nn.functional.conv2d(t, weight.to(t.device), padding=1)):
        got, want = f(dc), f(xc)
        assert got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want)
