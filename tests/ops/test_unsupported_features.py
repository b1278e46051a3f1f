"""Features Neuron does not have get clear errors, and the process stays usable."""
import pytest
import torch


def usable():
    assert (torch.ones(2, device="neuron") + 1).sum().item() == 4.0


def test_sparse_tensors():
    with pytest.raises(NotImplementedError, match="Sparse tensors are not supported on the neuron device"):
        torch.eye(3, device="neuron").to_sparse()
    with pytest.raises(NotImplementedError, match="Sparse tensors are not supported"):
        torch.sparse_coo_tensor(torch.tensor([[0], [1]]), torch.tensor([1.0]), (2, 2)).to("neuron")
    usable()


@pytest.mark.parametrize("build", [
    lambda d: torch.sparse_csr_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.ones(2), device=d),
    lambda d: torch.sparse_csc_tensor(torch.tensor([0, 1, 2]), torch.tensor([0, 1]), torch.ones(2), device=d),
    lambda d: torch.sparse_bsr_tensor(torch.tensor([0, 1]), torch.tensor([0]), torch.ones(1, 2, 2), device=d),
    lambda d: torch.sparse_bsc_tensor(torch.tensor([0, 1]), torch.tensor([0]), torch.ones(1, 2, 2), device=d),
    lambda d: torch.ops.aten._sparse_csr_tensor_unsafe(torch.tensor([0, 1, 2], device=d), torch.tensor([0, 1], device=d),
                                                       torch.ones(2, device=d), [2, 2]),
], ids=["csr", "csc", "bsr", "bsc", "csr_unsafe"])
def test_sparse_compressed_factories_are_refused(build):
    # their composite code would wrap dense device tensors in a sparse layout without a kernel refusing it
    assert build("cpu").layout != torch.strided
    with pytest.raises(NotImplementedError, match="Sparse tensors are not supported on the neuron device"):
        build("neuron")
    usable()


def test_nested_factory_is_refused():
    with pytest.raises(NotImplementedError, match="Nested tensors are not supported on the neuron device"):
        torch.ops.aten._nested_tensor_from_tensor_list([torch.ones(2, device="neuron"), torch.ones(2, device="neuron")])
    usable()


def test_nested_tensors(quiet):
    nested = torch.nested.nested_tensor([torch.ones(2), torch.ones(3)], device="neuron")
    with pytest.raises(NotImplementedError, match=r"Nested tensors are not supported on the neuron device \(aten::add\)"):
        nested + 1
    usable()


def test_forward_mode_ad():
    import torch.autograd.forward_ad as fwAD

    with pytest.raises(NotImplementedError, match="Forward-mode AD .* is not supported on the neuron device"):
        with fwAD.dual_level():
            fwAD.make_dual(torch.ones(2, device="neuron"), torch.ones(2, device="neuron"))
    usable()


def test_channels_last():
    x = torch.randn(2, 3, 4, 4, device="neuron")
    with pytest.raises(RuntimeError, match="Neuron tensors only support contiguous or preserve memory format"):
        x.contiguous(memory_format=torch.channels_last)
    with pytest.raises(RuntimeError, match="only support contiguous or preserve memory format"):
        x.to(memory_format=torch.channels_last)
    with pytest.raises(RuntimeError, match="only support contiguous or preserve memory format"):
        torch.randn(2, 3, 4, 4).to("neuron", memory_format=torch.channels_last)
    # a tensor whose strides merely look channels-last is an ordinary strided tensor
    y = x.permute(0, 2, 3, 1).contiguous().permute(0, 3, 1, 2)
    torch.testing.assert_close(torch.cat([y, y]).cpu(), torch.cat([y.cpu(), y.cpu()]))
    usable()
