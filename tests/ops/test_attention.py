"""scaled_dot_product_attention runs as TorchNeuron's one fused op, forward and backward."""
import pytest
import torch
import torch.nn.functional as F


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("causal, with_mask", [(True, False), (False, True), (False, False)])
def test_sdpa_is_one_fused_op_and_matches_cpu(tracking, dtype, causal, with_mask):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 16, 8, dtype=dtype, requires_grad=True) for _ in range(3))
    mask = torch.randn(16, 16, dtype=dtype) if with_mask else None
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal, attn_mask=mask)
    ref.float().sum().backward()
    qn, kn, vn = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    tracking.clear_op_tracking()
    out = F.scaled_dot_product_attention(qn, kn, vn, is_causal=causal,
                                         attn_mask=None if mask is None else mask.to("neuron"))
    out.float().sum().backward()
    executed = tracking.get_executed_ops()
    assert "aten::_scaled_dot_product_fused_attention_overrideable" in executed
    assert "aten::_scaled_dot_product_fused_attention_overrideable_backward" in executed
    assert "aten::bmm" not in executed and "aten::_softmax" not in executed
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), **tol)
    for dev, cpu in ((qn, q), (kn, k), (vn, v)):
        torch.testing.assert_close(dev.grad.cpu(), cpu.grad, **tol)


def test_sdpa_with_dropout_keeps_the_math_path(tracking, quiet):
    q = torch.randn(1, 2, 8, 4).to("neuron")
    tracking.clear_op_tracking()
    F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert "aten::_scaled_dot_product_fused_attention_overrideable" not in tracking.get_executed_ops()


def test_fused_attention_is_not_reported_as_64bit_compute(tracking):
    q = torch.randn(1, 2, 8, 4).to("neuron").requires_grad_()
    tracking.clear_op_tracking()
    F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    from localneuron.ops.tracking import NATIVE_32BIT, op_counts

    assert not [op for op in op_counts()[NATIVE_32BIT] if "attention" in op]
