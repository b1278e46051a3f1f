"""scaled_dot_product_attention runs as TorchNeuron's one fused op, forward and backward: multi-head, grouped-query
(`enable_gqa`), with a value head size other than the query/key one (multi-head latent attention: DeepSeek-V2/V3,
MiniCPM3, Kimi Linear...), causal or masked, eager and compiled, equal to the CPU within the sweeps' attention
tolerance (tests/support/sweep_compare.py: the device's flash kernel and the CPU's math path sum in other orders)."""
import math

import pytest
import torch
import torch.nn.functional as F

from sweep_compare import LOW_PRECISION_TOL, close_to_reference, tolerance

FUSED = "aten::_scaled_dot_product_fused_attention_overrideable"
FUSED_BACKWARD = "aten::_scaled_dot_product_fused_attention_overrideable_backward"
MATH_PATH_OPS = ("aten::bmm", "aten::_softmax", "aten::matmul", "aten::repeat_interleave")


def _tol(dtype):
    rtol, atol = tolerance("scaled_dot_product_attention", str(dtype).removeprefix("torch."))
    return {"rtol": rtol, "atol": atol}


def _assert_close(got, want, reference, what=""):
    """The sweeps' rule: within the attention tolerance of the CPU, or, in low precision, as close to the float32
    reference as the CPU's own low-precision result is (sweep_compare.close_to_reference)."""
    try:
        torch.testing.assert_close(got, want, **_tol(want.dtype))
    except AssertionError as error:
        low = str(want.dtype).removeprefix("torch.")
        if low not in LOW_PRECISION_TOL or not close_to_reference(want, got, reference, LOW_PRECISION_TOL[low][1]):
            raise AssertionError(f"{what}: {error}") from None


def _cpu_reference(q, k, v, **kwargs):
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, **kwargs)
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(7)).to(out.dtype)
    out.backward(grad)
    return out.detach(), grad, [t.grad for t in (q, k, v)]


def _float32_reference(q, k, v, grad, **kwargs):
    wide = {k: (v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v) for k, v in kwargs.items()}
    q, k, v = (t.detach().float().requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(q, k, v, **wide)
    out.backward(grad.float())
    return out.detach(), [t.grad for t in (q, k, v)]


def _on_device(attend, q, k, v, grad, **kwargs):
    qn, kn, vn = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    out = attend(qn, kn, vn, **kwargs)
    out.backward(grad.to("neuron"))
    return out.detach().cpu(), [t.grad.cpu() for t in (qn, kn, vn)], out


def _assert_fused(executed, backward=True):
    assert FUSED in executed
    assert not backward or FUSED_BACKWARD in executed
    assert not [op for op in MATH_PATH_OPS if op in executed], executed


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
    _assert_fused(tracking.get_executed_ops())
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.bfloat16 else {}
    torch.testing.assert_close(out.detach().cpu(), ref.detach(), **tol)
    for dev, cpu in ((qn, q), (kn, k), (vn, v)):
        torch.testing.assert_close(dev.grad.cpu(), cpu.grad, **tol)


# (query heads, key/value heads, query/key head size, value head size): DeepSeek-V3's 192/128 shrunk, a value head
# wider than the query/key one, grouped-query attention with either, and equal sizes with GQA.
HEADS_AND_SIZES = [(4, 4, 24, 16), (4, 4, 12, 20), (4, 2, 24, 16), (6, 2, 8, 12), (4, 1, 16, 16)]
MASKS = ["causal", "additive", "boolean", "none"]


def _inputs(heads, kv_heads, qk_size, v_size, dtype, query_length=10, key_length=10):
    g = torch.Generator().manual_seed(heads * 100 + kv_heads * 10 + qk_size + v_size)
    q = torch.randn(2, heads, query_length, qk_size, generator=g).to(dtype)
    k = torch.randn(2, kv_heads, key_length, qk_size, generator=g).to(dtype)
    v = torch.randn(2, kv_heads, key_length, v_size, generator=g).to(dtype)
    return q, k, v


def _mask_kwargs(kind, query_length, key_length, dtype):
    g = torch.Generator().manual_seed(3)
    if kind == "causal":
        return {"is_causal": True}
    if kind == "additive":
        return {"attn_mask": torch.randn(query_length, key_length, generator=g).to(dtype)}
    if kind == "boolean":  # every query keeps at least its diagonal key
        keep = torch.rand(2, 1, query_length, key_length, generator=g) > 0.4
        return {"attn_mask": keep | torch.eye(query_length, key_length, dtype=torch.bool)}
    return {}


def _device_kwargs(kwargs):
    return {k: v.to("neuron") if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("mask", MASKS)
@pytest.mark.parametrize("heads, kv_heads, qk_size, v_size", HEADS_AND_SIZES)
def test_value_head_size_and_grouped_heads_run_fused_like_cpu(tracking, heads, kv_heads, qk_size, v_size, mask,
                                                             dtype):
    q, k, v = _inputs(heads, kv_heads, qk_size, v_size, dtype)
    kwargs = {**_mask_kwargs(mask, 10, 10, dtype), "enable_gqa": heads != kv_heads}
    want, grad, want_grads = _cpu_reference(q, k, v, **kwargs)
    tracking.clear_op_tracking()
    got, got_grads, out = _on_device(F.scaled_dot_product_attention, q, k, v, grad, **_device_kwargs(kwargs))
    _assert_fused(tracking.get_executed_ops())
    assert out.shape == (2, heads, 10, v_size) and out.dtype == dtype
    reference, reference_grads = _float32_reference(q, k, v, grad, **kwargs)
    _assert_close(got, want, reference, "output")
    for name, g_dev, g_cpu, g_ref, t in zip("qkv", got_grads, want_grads, reference_grads, (q, k, v)):
        assert g_dev.shape == t.shape and g_dev.dtype == t.dtype, name
        _assert_close(g_dev, g_cpu, g_ref, f"gradient of {name}")


@pytest.mark.parametrize("scale", [None, 0.3, 1.0])
def test_default_scale_is_one_over_root_query_head_size(tracking, scale):
    # Zero-padding the query/key head to the value's width must not change the default scale: 1/sqrt(12), not
    # 1/sqrt(20). Large logits make a wrong scale visible far beyond the tolerance.
    q, k, v = _inputs(2, 2, 12, 20, torch.float32)
    q, k = q * 3, k * 3
    want, grad, want_grads = _cpu_reference(q, k, v, scale=scale)
    by_hand = torch.softmax(q @ k.transpose(-1, -2) * (scale or 1 / math.sqrt(12)), -1) @ v
    torch.testing.assert_close(want, by_hand, **_tol(torch.float32))
    got, got_grads, _ = _on_device(F.scaled_dot_product_attention, q, k, v, grad, scale=scale)
    torch.testing.assert_close(got, want, **_tol(torch.float32))
    for g_dev, g_cpu in zip(got_grads, want_grads):
        torch.testing.assert_close(g_dev, g_cpu, **_tol(torch.float32))


@pytest.mark.parametrize("query_length, key_length", [(3, 10), (10, 3), (1, 7)])
def test_cross_attention_lengths_with_another_value_head_size(query_length, key_length):
    q, k, v = _inputs(4, 2, 24, 16, torch.float32, query_length, key_length)
    for causal in (False, True):
        want, grad, want_grads = _cpu_reference(q, k, v, is_causal=causal, enable_gqa=True)
        got, got_grads, _ = _on_device(F.scaled_dot_product_attention, q, k, v, grad, is_causal=causal, enable_gqa=True)
        torch.testing.assert_close(got, want, **_tol(torch.float32))
        for g_dev, g_cpu in zip(got_grads, want_grads):
            torch.testing.assert_close(g_dev, g_cpu, **_tol(torch.float32))


def test_result_and_gradients_laid_out_as_the_meta_kernel_promises():
    # A query in (batch, sequence, heads, size) memory order, as models make it by transposing their projection:
    # the output keeps the query's dimension order with the value's size, and each gradient its input's layout.
    q = torch.randn(2, 10, 4, 24).transpose(1, 2)
    k = torch.randn(2, 10, 2, 24).transpose(1, 2)
    v = torch.randn(2, 10, 2, 16).transpose(1, 2)
    want, grad, _ = _cpu_reference(q, k, v, enable_gqa=True)
    qn, kn, vn = (t.detach().to("neuron").requires_grad_() for t in (q, k, v))
    out = F.scaled_dot_product_attention(qn, kn, vn, enable_gqa=True)
    fake = torch._subclasses.FakeTensorMode()
    fakes = [fake.from_tensor(t.detach()) for t in (qn, kn, vn)]
    with fake:
        meta_out = torch.ops.aten._scaled_dot_product_fused_attention_overrideable(*fakes)[0]
    assert out.stride() == meta_out.stride() == (640, 16, 64, 1)
    out.backward(grad.to("neuron"))
    for t in (qn, kn, vn):
        assert t.grad.stride() == t.stride()


@pytest.mark.parametrize("heads, kv_heads, qk_size, v_size", [(4, 4, 24, 16), (4, 2, 12, 20), (4, 4, 16, 16)])
def test_compiled_attention_is_the_fused_op_and_matches_cpu(quiet, monkeypatch, heads, kv_heads, qk_size, v_size):
    # The output feeds another op (cos): its backward and the attention's backward both read the saved output,
    # which Inductor once overwrote in place (donated buffers) before the attention's backward read it.
    from localneuron.compiler import graph_compiler

    graphs = []
    compile_host = graph_compiler.compile_host
    monkeypatch.setattr(graph_compiler, "compile_host", lambda gm, *rest: graphs.append(gm) or compile_host(gm, *rest))
    torch._dynamo.reset()
    q, k, v = _inputs(heads, kv_heads, qk_size, v_size, torch.float32)
    kwargs = {"is_causal": True, "enable_gqa": heads != kv_heads}

    def attend(q, k, v):
        return F.scaled_dot_product_attention(q.sin(), k, v, **kwargs).cos()

    grad = torch.randn(2, heads, 10, v_size, generator=torch.Generator().manual_seed(7))
    cpu_q, cpu_k, cpu_v = (t.detach().requires_grad_() for t in (q, k, v))
    want = attend(cpu_q, cpu_k, cpu_v)
    want.backward(grad)
    compiled = torch.compile(attend, backend="neuron", fullgraph=True)
    got, got_grads, _ = _on_device(lambda *a: compiled(*a), q, k, v, grad)
    ops = {str(n.target) for gm in graphs for n in gm.graph.nodes if n.op == "call_function"}
    assert {"aten._scaled_dot_product_fused_attention_overrideable.default",
            "aten._scaled_dot_product_fused_attention_overrideable_backward.default"} <= ops, ops
    assert not {"aten.bmm.default", "aten._softmax.default"} & ops, ops
    torch.testing.assert_close(got, want.detach(), **_tol(torch.float32))
    for name, g_dev, t in zip("qkv", got_grads, (cpu_q, cpu_k, cpu_v)):
        torch.testing.assert_close(g_dev, t.grad, **_tol(torch.float32), msg=lambda m, name=name: f"{name}: {m}")


def test_cost_model_prices_the_value_head_size():
    from localneuron.costmodel.engines import op_work
    from localneuron.costmodel.hardware import CHIPS

    chip = next(iter(CHIPS.values()))
    q, k, v = (torch.empty(2, 4, 16, d, device="meta") for d in (24, 24, 8))
    forward = op_work(chip, "aten::_scaled_dot_product_fused_attention_overrideable", [q, k, v], [])
    assert forward.flops == 2 * 2 * 4 * 16 * 16 * (24 + 8)  # scores over 24, weighted values over 8
    out = torch.empty(2, 4, 16, 8, device="meta")
    backward = op_work(chip, "aten::_scaled_dot_product_fused_attention_overrideable_backward", [out, q, k, v], [])
    assert backward.flops == 3 * forward.flops


def test_sdpa_with_dropout_keeps_the_math_path(tracking, quiet):
    q = torch.randn(1, 2, 8, 4).to("neuron")
    tracking.clear_op_tracking()
    F.scaled_dot_product_attention(q, q, q, dropout_p=0.5)
    assert FUSED not in tracking.get_executed_ops()


def test_invalid_grouped_heads_raise_pytorchs_error():
    q, k, v = (torch.randn(1, h, 4, 8).to("neuron") for h in (3, 2, 2))
    with pytest.raises(RuntimeError, match="must divide"):
        F.scaled_dot_product_attention(q, k, v, enable_gqa=True)


def test_fused_attention_is_not_reported_as_64bit_compute(tracking):
    q = torch.randn(1, 2, 8, 4).to("neuron").requires_grad_()
    tracking.clear_op_tracking()
    F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    from localneuron.ops.tracking import NATIVE_32BIT, op_counts

    assert not [op for op in op_counts()[NATIVE_32BIT] if "attention" in op]
