"""The ops the device registers kernels for, as TorchNeuron's torch_neuronx.utils.get_neuron_registered_ops lists them,
and TorchNeuron's rule about them: a CompositeImplicitAutograd op with no autograd formula of its own gets a device
kernel only where TorchNeuron registers one itself (a backend kernel takes the op out of autograd's decomposition).
What the device registers elsewhere for such an op (refusals, raw-byte composites) goes on its autograd key."""
import pytest
import torch

from torch_neuronx.utils import get_neuron_registered_ops

# CompositeImplicitAutograd ops without an autograd formula that TorchNeuron itself registers for the device, each
# where its source does (the pre-beta snapshot), so the device registers them too
TORCHNEURON_REGISTERS = {
    "_has_compatible_shallow_copy_type": "torch_neuronx/csrc/aten/NeuronNativeFunctions.cpp",
    "contiguous": "torch_neuronx/python_ops/contiguous.py",
    "index_select_backward": "torch_neuronx/python_ops/torch_mlir/ops/indexing.py",
    "isfinite": "torch_neuronx/python_ops/torch_mlir/ops/comparison.py",
    "one_hot": "torch_neuronx/python_ops/torch_mlir/ops/embedding.py",
    "rms_norm": "torch_neuronx/python_ops/__init__.py (dispatched to _fused_rms_norm)",
}


def registrations(key: str) -> set:
    return {name.removeprefix("aten::") for name in torch._C._dispatch_get_registrations_for_dispatch_key(key)
            if name.startswith("aten::")}


def test_the_list_is_the_dispatchers_with_or_without_overloads():
    everything = set(torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1"))
    with_overloads = get_neuron_registered_ops(keep_variant=True)
    assert with_overloads == {name.partition("::")[2] for name in everything}
    assert "add.Tensor" in with_overloads and "allreduce_" in with_overloads  # c10d's collectives are the device's too
    bare = get_neuron_registered_ops()
    assert bare == {name.partition(".")[0] for name in with_overloads} and "add" in bare and "add.Tensor" not in bare
    listed = get_neuron_registered_ops(as_sorted=True, keep_variant=True)
    assert isinstance(listed, list) and listed == sorted(with_overloads)


def test_composites_without_a_formula_are_registered_only_where_torchneuron_registers_them():
    composite, formula = registrations("CompositeImplicitAutograd"), registrations("Autograd")
    registered = {name.partition(".")[0] for name in registrations("PrivateUse1") & composite - formula}
    assert registered == set(TORCHNEURON_REGISTERS)


@pytest.mark.parametrize("call", [
    lambda d: torch.sparse_csr_tensor(torch.tensor([0, 1, 2], device=d), torch.tensor([0, 1], device=d),
                                      torch.tensor([1.0, 2.0], device=d), (2, 2)),
    lambda d: torch.ones(3, 3, device=d).to_sparse(),
    lambda d: torch.ones(3, 3, device=d).to_sparse_csr(),
], ids=["sparse_csr_tensor", "to_sparse", "to_sparse_csr"])
@pytest.mark.parametrize("mode", [torch.enable_grad, torch.no_grad, torch.inference_mode])
def test_sparse_layouts_are_refused_from_the_autograd_key_and_below_it(call, mode):
    """The refusals of CompositeImplicitAutograd factories sit on the autograd key; inference mode skips that key,
    and the composite then reaches a refusal of its own below it."""
    with mode(), pytest.raises(NotImplementedError, match="Sparse tensors are not supported on the neuron device"):
        call("neuron")


def test_a_raw_byte_composite_runs_as_queued_device_ops_clamped_as_on_the_cpu():
    weights = [torch.tensor([[1e6, float("nan")], [-1e6, float("inf")]]),  # NaN kept, inf clamped
               torch.full((2, 2, 2), 1e6),  # only the first size(0) * size(1) elements
               torch.full((2, 3), 1e6).t()]  # a non-contiguous weight comes back untouched
    for weight in weights:
        on_cpu = torch.ops.aten._saturate_weight_to_fp16(weight.clone())
        on_device = weight.to("neuron")
        for _ in range(3):  # queued behind the multiplications that make it
            on_device = on_device * torch.ones_like(on_device)
        result = torch.ops.aten._saturate_weight_to_fp16(on_device)
        assert result is on_device
        torch.testing.assert_close(result.cpu(), on_cpu, atol=0, rtol=0, equal_nan=True)


@pytest.mark.parametrize("weight,error", [(torch.ones(2, 2, dtype=torch.int32), RuntimeError),
                                          (torch.ones(2, 2, dtype=torch.float64), RuntimeError),
                                          (torch.ones(3), IndexError)])
def test_a_raw_byte_composite_refuses_what_the_cpu_refuses(weight, error):
    with pytest.raises(error) as on_cpu:
        torch.ops.aten._saturate_weight_to_fp16(weight)
    with pytest.raises(error) as on_device:
        torch.ops.aten._saturate_weight_to_fp16(weight.to("neuron"))
    assert str(on_device.value) == str(on_cpu.value)
