"""Ops with only CUDA kernels that PyTorch's composite code picks on an accelerator
(localneuron/ops/decompositions.py): the fused LSTM/GRU cells behind nn.LSTM, nn.GRU, LSTMCell and
GRUCell (eager, no_grad, compiled), the flash / memory-efficient attention kernels, SyncBatchNorm's
statistics kernels (two real processes), the out_dtype matmuls; forward and backward, against the CPU."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from distributed_launcher import run

TOL = {"atol": 1e-5, "rtol": 1e-4}


def run_module(factory, device, inputs, grad=True):
    torch.manual_seed(0)
    module = factory().to(device)
    moved = [x.detach().to(device).requires_grad_(grad) for x in inputs]
    out = module(*moved)
    flat = [t for t in (out if isinstance(out, tuple) else (out,)) for t in (t if isinstance(t, tuple) else (t,))]
    if not grad:
        return [t.cpu() for t in flat]
    sum(t.float().pow(2).sum() for t in flat).backward()
    return [t.detach().cpu() for t in flat] + [x.grad.cpu() for x in moved] + \
        [p.grad.cpu() for p in module.parameters()]


RNNS = {
    "lstm": (lambda: nn.LSTM(6, 5, num_layers=2, bidirectional=True), lambda: [torch.randn(4, 3, 6)]),
    "lstm_no_bias": (lambda: nn.LSTM(6, 5, bias=False, batch_first=True), lambda: [torch.randn(3, 4, 6)]),
    "gru": (lambda: nn.GRU(6, 5, num_layers=2, bidirectional=True), lambda: [torch.randn(4, 3, 6)]),
    "gru_no_bias": (lambda: nn.GRU(6, 5, bias=False), lambda: [torch.randn(4, 3, 6)]),
    "lstm_cell": (lambda: nn.LSTMCell(6, 5), lambda: [torch.randn(3, 6)]),
    "gru_cell": (lambda: nn.GRUCell(6, 5), lambda: [torch.randn(3, 6), torch.randn(3, 5)]),
}


@pytest.mark.parametrize("name", sorted(RNNS))
def test_recurrent_modules_forward_and_backward_match_cpu(name):
    factory, inputs = RNNS[name]
    torch.manual_seed(1)
    xs = inputs()
    for got, want in zip(run_module(factory, "neuron", xs), run_module(factory, "cpu", xs), strict=True):
        torch.testing.assert_close(got, want, **TOL)


@pytest.mark.parametrize("name", ["lstm", "gru_cell"])
def test_recurrent_modules_under_no_grad_and_inference_mode_match_cpu(name):
    factory, inputs = RNNS[name]
    torch.manual_seed(1)
    xs = inputs()
    want = run_module(factory, "cpu", xs, grad=False)
    for context in (torch.no_grad, torch.inference_mode):
        with context():
            got = run_module(factory, "neuron", xs, grad=False)
        for g, w in zip(got, want, strict=True):
            torch.testing.assert_close(g, w, **TOL)


def test_lstm_double_backward_matches_cpu():
    def grad_norm(device):
        torch.manual_seed(0)
        cell = nn.LSTMCell(4, 3).to(device)
        x = torch.randn(2, 4).to(device).requires_grad_()
        (g,) = torch.autograd.grad(cell(x)[0].pow(2).sum(), x, create_graph=True)
        g.pow(2).sum().backward()
        return x.grad.cpu()

    torch.testing.assert_close(grad_norm("neuron"), grad_norm("cpu"), **TOL)


@pytest.mark.parametrize("name", ["lstm", "gru"])
def test_compiled_recurrent_modules_match_cpu(name):
    factory, inputs = RNNS[name]
    torch.manual_seed(1)
    xs = inputs()
    compiled = run_module(lambda: torch.compile(factory(), backend="neuron"), "neuron", xs)
    for got, want in zip(compiled, run_module(factory, "cpu", xs), strict=True):
        torch.testing.assert_close(got, want, **TOL)


def reference_attention(q, k, v, *, causal_offset=None, bias=None, scale=None):
    """Math attention on (batch, seq, heads, dim) tensors on the CPU, with autograd."""
    qh, kh, vh = (t.transpose(1, 2) for t in (q, k, v))
    groups = qh.shape[1] // kh.shape[1]
    kh, vh = kh.repeat_interleave(groups, 1), vh.repeat_interleave(groups, 1)
    s = qh @ kh.transpose(-1, -2) * (scale if scale is not None else 1 / math.sqrt(q.shape[-1]))
    if bias is not None:
        s = s + bias
    if causal_offset is not None:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril(causal_offset)
        s = s.masked_fill(~keep, float("-inf"))
    return (F.softmax(s, -1) @ vh).transpose(1, 2), s.logsumexp(-1)


def attention_inputs(q_len=5, k_len=5, heads=4, kv_heads=4):
    g = torch.Generator().manual_seed(3)
    return (torch.randn(2, q_len, heads, 8, generator=g), torch.randn(2, k_len, kv_heads, 8, generator=g),
            torch.randn(2, k_len, kv_heads, 8, generator=g), torch.randn(2, q_len, heads, 8, generator=g))


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kv_heads", [4, 2])
def test_flash_attention_forward_and_backward_match_cpu_math(causal, kv_heads):
    q, k, v, grad = attention_inputs(kv_heads=kv_heads)
    qc, kc, vc = (t.clone().requires_grad_() for t in (q, k, v))
    want, want_lse = reference_attention(qc, kc, vc, causal_offset=0 if causal else None, scale=0.3)
    want.backward(grad)
    dq, dk, dv = (t.to("neuron") for t in (q, k, v))
    out, lse, rng_state, _, _ = torch.ops.aten._flash_attention_forward(dq, dk, dv, None, None, 5, 5, 0.0, causal,
                                                                          False, scale=0.3)
    torch.testing.assert_close(out.cpu(), want.detach(), **TOL)
    torch.testing.assert_close(lse.cpu(), want_lse.detach(), **TOL)
    grads = torch.ops.aten._flash_attention_backward(grad.to("neuron"), dq, dk, dv, out, lse, None, None, 5, 5, 0.0,
                                                      causal, rng_state, torch.empty(0, device="neuron"), scale=0.3)
    for got, ref in zip(grads, (qc.grad, kc.grad, vc.grad), strict=True):
        torch.testing.assert_close(got.cpu(), ref, **TOL)


@pytest.mark.parametrize("mask_type,offset", [(0, None), (1, 0), (2, 3)])
def test_efficient_attention_with_bias_matches_cpu_math(mask_type, offset):
    q, k, v, grad = attention_inputs(q_len=5, k_len=8)
    bias = torch.randn(2, 4, 5, 8, generator=torch.Generator().manual_seed(4))
    qc, kc, vc, bc = (t.clone().requires_grad_() for t in (q, k, v, bias))
    want, want_lse = reference_attention(qc, kc, vc, causal_offset=offset, bias=bc)
    want.backward(grad)
    dq, dk, dv, db = (t.to("neuron") for t in (q, k, v, bias))
    out, lse, seed, offset_t, _, _ = torch.ops.aten._efficient_attention_forward(
        dq, dk, dv, db, None, None, None, None, 0.0, mask_type, True)
    torch.testing.assert_close(out.cpu(), want.detach(), **TOL)
    assert lse.shape == (2, 4, 32)  # padded to the kernel's block of 32 queries, as on CUDA
    torch.testing.assert_close(lse[..., :5].cpu(), want_lse.detach(), **TOL)
    grads = torch.ops.aten._efficient_attention_backward(grad.to("neuron"), dq, dk, dv, db, out, None, None, 5, 8,
                                                          lse, 0.0, seed, offset_t, mask_type, True)
    for got, ref in zip(grads, (qc.grad, kc.grad, vc.grad, bc.grad), strict=True):
        torch.testing.assert_close(got.cpu(), ref, **TOL)


def test_attention_kernels_refuse_dropout_with_advice():
    q, k, v, _ = (t.to("neuron") for t in attention_inputs())
    with pytest.raises(NotImplementedError, match="scaled_dot_product_attention"):
        torch.ops.aten._flash_attention_forward(q, k, v, None, None, 5, 5, 0.1, False, False)


@pytest.mark.parametrize("op,args", [
    ("mm", ((3, 4), (4, 5))), ("bmm", ((2, 3, 4), (2, 4, 5))),
    ("addmm", ((3, 5), (3, 4), (4, 5))), ("baddbmm", ((2, 3, 5), (2, 3, 4), (2, 4, 5))),
])
def test_matmuls_with_an_output_dtype_accumulate_in_it(op, args):
    g = torch.Generator().manual_seed(5)
    tensors = [torch.randn(*shape, generator=g).to(torch.bfloat16) for shape in args]
    got = getattr(torch, op)(*(t.to("neuron") for t in tensors), out_dtype=torch.float32)
    want = getattr(torch, op)(*(t.float() for t in tensors))
    assert got.dtype == torch.float32
    torch.testing.assert_close(got.cpu(), want, **TOL)


def sync_batch_norm(device: str) -> dict:
    """Each rank normalises its half of a global batch with SyncBatchNorm; the statistics are global."""
    import torch.distributed as dist

    rank = dist.get_rank()
    x = torch.randn(8, 3, 4, generator=torch.Generator().manual_seed(7)) * 3 + 1
    grad = torch.randn(8, 3, 4, generator=torch.Generator().manual_seed(8))
    torch.manual_seed(0)
    norm = nn.SyncBatchNorm(3).to(device)
    nn.init.normal_(norm.weight)
    local = x[4 * rank:4 * rank + 4].to(device).requires_grad_()
    y = norm(local)
    y.backward(grad[4 * rank:4 * rank + 4].to(device))
    return {"y": y.detach().cpu(), "x_grad": local.grad.cpu(), "weight_grad": norm.weight.grad.cpu(),
            "running_mean": norm.running_mean.cpu(), "running_var": norm.running_var.cpu()}


def test_sync_batch_norm_matches_batch_norm_over_the_global_batch():
    results = run(__file__, "sync_batch_norm", 2, backends=(("neuron", "neuron"),))
    x = torch.randn(8, 3, 4, generator=torch.Generator().manual_seed(7)) * 3 + 1
    grad = torch.randn(8, 3, 4, generator=torch.Generator().manual_seed(8))
    torch.manual_seed(0)
    norm = nn.BatchNorm1d(3)  # the CPU has no SyncBatchNorm: the reference is one BatchNorm over both halves
    nn.init.normal_(norm.weight)
    whole = x.clone().requires_grad_()
    y = norm(whole)
    y.backward(grad)
    for rank, result in enumerate(results):
        got = result["neuron"]
        rows = slice(4 * rank, 4 * rank + 4)
        torch.testing.assert_close(got["y"], y.detach()[rows], **TOL)
        torch.testing.assert_close(got["x_grad"], whole.grad[rows], **TOL)
        torch.testing.assert_close(got["running_mean"], norm.running_mean, **TOL)
        torch.testing.assert_close(got["running_var"], norm.running_var, **TOL)
    # each rank's parameter gradient covers its half of the batch; DDP would sum them
    torch.testing.assert_close(sum(r["neuron"]["weight_grad"] for r in results), norm.weight.grad, **TOL)


@pytest.mark.parametrize("flags", [(True, True, True), (False, True, True), (False, True, False), (True, False, False),
                                   (False, False, False)])
def test_batch_norm_backward_reduce_gives_all_four_results_whatever_the_flags(flags):
    """TorchNeuron's kernel returns sum_dy, sum_dy_xmu, grad_weight and grad_bias for every input_g / weight_g /
    bias_g (its own tests read their shapes); CUDA's leaves the unrequested ones undefined."""
    from localneuron.ops import tracking

    g = torch.Generator().manual_seed(3)
    grad, x = torch.randn(2, 8, 4, 4, generator=g), torch.randn(2, 8, 4, 4, generator=g)
    mean, invstd, weight = torch.randn(8, generator=g), torch.rand(8, generator=g) + 0.5, torch.randn(8, generator=g)
    tracking.clear_op_tracking()
    got = torch.ops.aten.batch_norm_backward_reduce(*(t.to("neuron") for t in (grad, x, mean, invstd, weight)), *flags)
    torch.neuron.synchronize()
    assert "aten::batch_norm_backward_reduce" in tracking.get_executed_ops()
    sum_dy = grad.sum((0, 2, 3))
    sum_dy_xmu = (grad * (x - mean.view(1, 8, 1, 1))).sum((0, 2, 3))
    for result, want in zip(got, (sum_dy, sum_dy_xmu, sum_dy_xmu * invstd, sum_dy)):
        assert result is not None and result.device.type == "neuron"
        torch.testing.assert_close(result.cpu(), want, **TOL)


@pytest.mark.parametrize("call", [
    lambda: torch._fused_dropout(torch.ones(4, device="neuron"), 0.5),
    lambda: torch.ops.aten._cudnn_init_dropout_state(0.5, True, 0, dtype=torch.uint8, device="neuron"),
])
def test_cuda_only_ops_without_a_decomposition_refuse_with_advice(call):
    with pytest.raises(NotImplementedError, match="no implementation for the neuron device.*portable operator"):
        call()
