"""torch._copy_from_and_resize, the kernel a CPU fallback writes its result back with, as TorchNeuron has it: a CPU
source into a neuron destination, resized through the dispatcher (tracked as aten::resize_) only when it is empty;
a non-empty destination of another size, a neuron source or a CPU destination are refused with what to do."""
import pytest
import torch


def executed(tracking, fn):
    tracking.clear_op_tracking()
    result = fn()
    torch.neuron.synchronize()
    return result, set(tracking.get_executed_ops())


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.bool])
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 0, 3)])
def test_an_empty_destination_is_resized_and_filled(shape, dtype, tracking):
    source = torch.arange(torch.Size(shape).numel()).reshape(shape).to(dtype)
    destination = torch.empty(0, dtype=dtype, device="neuron")
    result, ops = executed(tracking, lambda: torch._copy_from_and_resize(source, destination))
    assert result.shape == shape and destination.shape == shape and result.device.type == "neuron"
    assert torch.equal(destination.cpu(), source)
    assert {"aten::_copy_from_and_resize", "aten::resize_"} <= ops


def test_a_destination_of_the_same_size_is_not_resized(tracking):
    source = torch.randn(3, 4)
    destination = torch.zeros(3, 4, device="neuron")
    _, ops = executed(tracking, lambda: torch._copy_from_and_resize(source, destination))
    assert torch.equal(destination.cpu(), source)
    assert "aten::_copy_from_and_resize" in ops and "aten::resize_" not in ops


def test_a_non_empty_destination_of_another_size_is_refused_and_left_as_it_was():
    destination = torch.ones(2, 2, device="neuron")
    with pytest.raises(RuntimeError, match="same size.*empty destination"):
        torch._copy_from_and_resize(torch.randn(3, 4), destination)
    assert destination.shape == (2, 2) and torch.equal(destination.cpu(), torch.ones(2, 2))


@pytest.mark.parametrize("source_device,destination_device", [("neuron", "neuron"), ("neuron", "cpu")])
def test_only_a_cpu_source_into_a_neuron_destination_is_taken(source_device, destination_device):
    source = torch.randn(3, device=source_device)
    destination = torch.empty(0, device=destination_device)
    with pytest.raises(RuntimeError, match="only support copy from cpu tensor to neuron tensor.*copy_"):
        torch._copy_from_and_resize(source, destination)
