"""Features Neuron does not have get clear errors, and the process stays usable."""
import warnings

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


def _native_mha_args(device):
    g = torch.Generator().manual_seed(0)
    embed, heads = 32, 4
    q, k, v = (torch.randn(2, 16, embed, generator=g) for _ in range(3))
    weights = (torch.randn(3 * embed, embed, generator=g) * 0.1, torch.randn(3 * embed, generator=g),
               torch.randn(embed, embed, generator=g) * 0.1, torch.randn(embed, generator=g))
    q, k, v, qkv_w, qkv_b, proj_w, proj_b = (t.to(device) for t in (q, k, v, *weights))
    return (q, k, v, embed, heads, qkv_w, qkv_b, proj_w, proj_b)


def test_native_multi_head_attention_without_weights_or_mask_tensors():
    """TorchNeuron's _native_multi_head_attention (nn.MultiheadAttention's inference fast path) computes no attention
    weights, returned as an empty tensor (the CPU kernel returns None), and refuses need_weights=True and mask
    tensors with NotImplementedError saying what to do."""
    cpu, _ = torch.ops.aten._native_multi_head_attention(*_native_mha_args("cpu"), need_weights=False)
    output, weights = torch.ops.aten._native_multi_head_attention(*_native_mha_args("neuron"), need_weights=False)
    torch.testing.assert_close(output.cpu(), cpu)
    assert weights.device.type == "neuron" and weights.numel() == 0
    with pytest.raises(NotImplementedError, match=r"need_weights=True.*not yet supported.*need_weights=False"):
        torch.ops.aten._native_multi_head_attention(*_native_mha_args("neuron"), need_weights=True)
        torch.neuron.synchronize()
    mask = torch.ones(2, 16, 16, dtype=torch.bool, device="neuron")
    for need_weights in (False, True):  # the mask is refused first
        with pytest.raises(NotImplementedError, match=r"Arbitrary mask tensors not yet supported.*set_fastpath"):
            torch.ops.aten._native_multi_head_attention(*_native_mha_args("neuron"), mask=mask,
                                                        need_weights=need_weights)
            torch.neuron.synchronize()
    usable()
    # nn.MultiheadAttention's fast path with need_weights=False, and with the fast path off, as on the CPU
    attention = torch.nn.MultiheadAttention(32, 4, batch_first=True).eval()
    x = torch.randn(2, 16, 32, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want, _ = attention(x, x, x, need_weights=False)
        attention.to("neuron")
        xn = x.to("neuron")
        got, _ = attention(xn, xn, xn, need_weights=False)
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            slow, slow_weights = attention(xn, xn, xn)
        finally:
            torch.backends.mha.set_fastpath_enabled(True)
    torch.testing.assert_close(got.cpu(), want)
    torch.testing.assert_close(slow.cpu(), want)
    assert slow_weights.shape == (2, 16, 16)


def test_native_multi_head_attention_warns_when_the_sequence_does_not_fit_the_flash_kernel():
    """TorchNeuron's flash attention kernel takes sequences of a multiple of 512 tokens; for others its
    _native_multi_head_attention warns and runs its other implementation (the same result)."""
    with pytest.warns(UserWarning, match=r"Sequence length 16 is not a multiple of 512\. Falling back"):
        short, _ = torch.ops.aten._native_multi_head_attention(*_native_mha_args("neuron"), need_weights=False)
    cpu, _ = torch.ops.aten._native_multi_head_attention(*_native_mha_args("cpu"), need_weights=False)
    torch.testing.assert_close(short.cpu(), cpu)
    g = torch.Generator().manual_seed(2)
    q = torch.randn(1, 1024, 8, generator=g)
    weights = (torch.randn(24, 8, generator=g), torch.randn(24, generator=g), torch.randn(8, 8, generator=g),
               torch.randn(8, generator=g))
    args = (q, q, q, 8, 2, *weights)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fits, _ = torch.ops.aten._native_multi_head_attention(*(a.to("neuron") if isinstance(a, torch.Tensor) else a
                                                                 for a in args), need_weights=False)
    torch.testing.assert_close(fits.cpu(), torch.ops.aten._native_multi_head_attention(*args, need_weights=False)[0],
                               rtol=1e-3, atol=1e-4)
