"""FlexAttention on `neuron`, eager and compiled with backend `neuron` (TorchNeuron's "mixed mode"), forward
and backward, against the CPU's scaled_dot_product_attention with the same mask (the CPU itself refuses
flex attention backward)."""
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention.flex_attention import create_block_mask, flex_attention


def causal(batch, head, q_index, kv_index):
    return q_index >= kv_index


def reference(q, k, v):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    out.sum().backward()
    return out.detach(), [t.grad for t in (q, k, v)]


@pytest.mark.parametrize("compiled", [False, True], ids=["eager", "compiled"])
def test_flex_attention_trains_on_neuron_like_cpu_sdpa(compiled, quiet):
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 2, 128, 16) for _ in range(3))
    want_out, want_grads = reference(q, k, v)
    qn, kn, vn = (t.to("neuron").requires_grad_() for t in (q, k, v))
    mask = create_block_mask(causal, None, None, 128, 128, device="neuron")

    def attend(q, k, v):
        return flex_attention(q, k, v, block_mask=mask)

    run = torch.compile(attend, backend="neuron", fullgraph=True) if compiled else attend
    out = run(qn, kn, vn)
    out.sum().backward()
    torch.testing.assert_close(out.detach().cpu(), want_out, atol=1e-5, rtol=1e-5)
    for got, want in zip((qn.grad, kn.grad, vn.grad), want_grads):
        torch.testing.assert_close(got.cpu(), want, atol=1e-5, rtol=1e-5)


def test_flex_attention_still_refused_where_pytorch_refuses_it():
    q = torch.randn(1, 1, 16, 8, device="meta")
    with pytest.raises(ValueError, match="FlexAttention is only supported on"):
        flex_attention(q, q, q)


def test_compiled_graphs_run_flex_attention_eagerly_between_compiled_pieces(quiet):
    from localneuron.compiler import metrics

    q = torch.randn(1, 1, 128, 16, device="neuron", requires_grad=True)
    before = len(metrics.graphs())
    out = torch.compile(lambda q: flex_attention(q.sin(), q, q).cos(), backend="neuron")(q)
    out.sum().backward()
    forward, backward = metrics.graphs()[before:]
    assert forward.eager_ops == ["higher_order::flex_attention"] and forward.pieces == 2  # compiled pieces either side
    assert backward.eager_ops == ["higher_order::flex_attention_backward"]
