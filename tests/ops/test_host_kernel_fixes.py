"""Host-kernel fixes (localneuron/ops/host_kernel_fixes.py): where the CPU kernel the device runs on refuses,
miscomputes or is inconsistent on what an accelerator accepts, the device computes what the accelerator computes.
Each case is checked against the CPU computing the same thing in a wider type, or names which CPU answer it
follows: histc on integers (MoE routers) and in bf16/fp16, fused SGD in fp16/bf16, batch_norm with mixed
float32/low-precision parameters, gcd at the signed minimum, logit_backward at signed zero (the CPU's vectorized
and scalar loops disagree), embedding_bag with scale_grad_by_freq, grid_sampler_2d/3d forward and backward in
fp16/bf16 (the CPU rounds coordinates to low precision), a float64 op's backward on the autograd engine's
device thread, convolution_backward's output_mask (the CPU returns a weight gradient it did not ask for), softmax
and log_softmax with half_to_float (the CPU refuses it), and amax/amin into an out= of another dtype (TorchNeuron's
TypeError)."""

import pytest
import torch
import torch.nn.functional as F

LOW = [torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.uint8])
def test_histc_on_integers_counts_exactly_in_the_input_dtype(dtype):
    x = torch.randint(0, 8, (1000,), dtype=dtype, generator=torch.Generator().manual_seed(0))
    got = torch.histc(x.to("neuron"), bins=8, min=0, max=7)
    assert got.dtype == dtype and got.device.type == "neuron"
    want = torch.histc(x.double(), bins=8, min=0, max=7).to(dtype)
    assert torch.equal(got.cpu(), want) and int(got.sum()) == 1000


def test_moe_router_token_counts_match_cpu():
    """The router step of Mixtral / Qwen3-MoE / DeepSeek-V3 / gpt-oss: top-k experts per token, then
    tokens per expert with histc on the integer expert indices."""
    num_experts, top_k = 8, 2
    logits = torch.randn(64, num_experts, generator=torch.Generator().manual_seed(1))
    _, experts = torch.topk(F.softmax(logits, dim=-1), top_k, dim=-1)
    got = torch.histc(experts.to("neuron"), bins=num_experts, min=0, max=num_experts - 1)
    want = torch.bincount(experts.flatten(), minlength=num_experts)
    assert torch.equal(got.cpu(), want)
    out = torch.empty(0, dtype=torch.int64, device="neuron")
    torch.histc(experts.int().to("neuron"), bins=num_experts, min=0, max=num_experts - 1, out=out.int())
    assert torch.equal(torch.histc(experts.int().to("neuron"), bins=num_experts, min=0,
                                   max=num_experts - 1).cpu().long(), want)


@pytest.mark.parametrize("dtype", LOW)
def test_histc_counts_are_not_accumulated_in_low_precision(dtype):
    x = torch.rand(3000, generator=torch.Generator().manual_seed(2)).to(dtype)
    got = torch.histc(x.to("neuron"), bins=4, min=0, max=1)
    want = torch.histc(x.float(), bins=4, min=0, max=1).to(dtype)
    assert got.dtype == dtype and torch.equal(got.cpu(), want)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("options", [{}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True, "weight_decay": 0.1},
                                     {"momentum": 0.5, "dampening": 0.3, "maximize": True}])
def test_fused_sgd_in_low_precision_matches_the_float32_step(dtype, options):
    def train(device, fused):
        torch.manual_seed(0)
        p = torch.nn.Parameter(torch.randn(257).to(dtype).to(device))
        opt = torch.optim.SGD([p], lr=0.1, fused=fused, foreach=False if not fused else None, **options)
        for step in range(3):
            p.grad = (torch.randn(257) * (step + 1)).to(dtype).to(device)
            opt.step()
        return p.detach().cpu()

    # the per-parameter loop is right up to its extra roundings; the CPU's fused kernel is off by ~0.1
    torch.testing.assert_close(train("neuron", True), train("cpu", False), atol=1e-2, rtol=2e-2)


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("training", [True, False])
def test_batch_norm_low_precision_input_with_mixed_parameters(dtype, training):
    def run(device, param_dtype):
        torch.manual_seed(0)
        x = torch.randn(4, 3, 5, 5).to(dtype).to(device).requires_grad_()
        # parameter values representable in the low precision, so both runs start from the same numbers
        weight = torch.randn(3).to(dtype).to(param_dtype).to(device).requires_grad_()
        bias = torch.randn(3).to(dtype).to(param_dtype).to(device).requires_grad_()
        mean, var = torch.randn(3).to(device), (torch.rand(3) + 0.5).to(device)  # float32 running stats
        y = F.batch_norm(x, mean, var, weight, bias, training=training)
        y.float().pow(2).sum().backward()
        return y, x.grad, weight.grad, bias.grad, mean, var

    got = run("neuron", dtype)
    want = run("cpu", torch.float32)  # the CPU accepts float32 parameters; low-precision ones only on the device
    assert got[0].dtype == dtype and got[2].dtype == dtype
    for g, w in zip(got, want):
        torch.testing.assert_close(g.cpu().float(), w.float(), atol=2e-2, rtol=2e-2)

def _signed_int_grid(dtype):
    info = torch.iinfo(dtype)
    values = torch.tensor([info.min, info.min + 1, info.min // 2, -6, -1, 0, 1, 2, 6, info.max], dtype=dtype)
    n = len(values)
    return values[:, None].expand(n, n).contiguous(), values[None, :].expand(n, n).contiguous()


@pytest.mark.parametrize("dtype", [torch.int8, torch.int16, torch.int32, torch.uint8])
def test_gcd_at_the_signed_minimum_matches_cpu(dtype):
    if dtype == torch.uint8:
        a = torch.arange(0, 256, 7, dtype=dtype)
        b = a.flip(0)
    else:
        a, b = _signed_int_grid(dtype)
    want = torch.gcd(a, b)
    assert torch.equal(torch.gcd(a.to("neuron"), b.to("neuron")).cpu(), want)
    assert torch.equal(a.to("neuron").gcd_(b.to("neuron")).cpu(), want)


def test_gcd_int64_follows_the_64bit_policy_at_the_int32_minimum(quiet):
    # int64 is computed in 32 bits (TorchNeuron's 64-bit policy, docs/support-matrix.md#eager-ops): results
    # outside the int32 range wrap. gcd(-2**31, 0) is 2**31 on the CPU and wraps to -2**31; every
    # other result of int32-range inputs is the CPU's.
    a32, b32 = _signed_int_grid(torch.int32)
    want = torch.gcd(a32.long(), b32.long())
    got = torch.gcd(a32.long().to("neuron"), b32.long().to("neuron")).cpu()
    assert got.dtype == torch.int64
    assert torch.equal(got, want.to(torch.int32).long())
    assert int(want[0, 5]) == 2**31 and int(got[0, 5]) == -2**31
    in_range = want.abs() < 2**31
    assert torch.equal(got[in_range], want[in_range])


def _logit_backward_cuda(grad, x, eps):
    """CUDA's formula in its opmath (float32), rounded once: NaN (no eps) or 0 outside the domain, else
    dy / (x (1 - x))."""
    g, x = grad.float(), x.float()
    lo, hi = (0.0, 1.0) if eps is None else (eps, 1.0 - eps)
    fill = float("nan") if eps is None else 0.0
    return torch.where((x < lo) | (x > hi), torch.full_like(x, fill), g / (x * (1 - x))).to(grad.dtype)


def _same_bits(a, b):
    """Equal values with the same sign of zero and infinity, NaN where the other has NaN."""
    a, b = a.double(), b.double()
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(), b.nan_to_num()) \
        and torch.equal(a.signbit() | a.isnan(), b.signbit() | b.isnan())


SPECIAL_X = [-0.5, 0.0, -0.0, 1e-6, 0.05, 0.1, 0.5, 0.9, 0.95, 1.0, 1.5, float("nan"), float("inf")]
GRADS = [1.0, -1.0, 0.0, -0.0, 2.0, -3.0]


@pytest.mark.parametrize("dtype", [torch.float32] + LOW)
@pytest.mark.parametrize("eps", [None, 0.0, 0.05])
def test_logit_backward_is_one_formula_whatever_the_layout(dtype, eps):
    x = torch.tensor(SPECIAL_X)[:, None].expand(len(SPECIAL_X), len(GRADS)).contiguous().to(dtype)
    g = torch.tensor(GRADS)[None, :].expand_as(x).contiguous().to(dtype)
    want = _logit_backward_cuda(g, x, eps)
    layouts = {"contiguous": (x, g), "transposed": (x.t().contiguous().t(), g.t().contiguous().t()),
               "broadcast grad": (x[:, :1].expand_as(x), g[:, :1].expand_as(x))}
    for name, (xl, gl) in layouts.items():
        got = torch.ops.aten.logit_backward(gl.to("neuron"), xl.to("neuron"), eps).cpu()
        expected = want if name != "broadcast grad" else _logit_backward_cuda(gl, xl, eps)
        assert _same_bits(got, expected), (name, got, expected)
    # where the CPU's vectorized loop runs (long contiguous rows; its tail runs the scalar loop) the
    # CPU agrees, -0.0 included: exactly in float32, up to its roundings between steps in fp16/bf16
    n = 256 - 16
    x_long = torch.tensor(SPECIAL_X).repeat(24)[:256].to(dtype)
    g_long = torch.tensor(GRADS).repeat(48)[:256].to(dtype)
    cpu = torch.ops.aten.logit_backward(g_long, x_long, None)[:n]
    got = torch.ops.aten.logit_backward(g_long.to("neuron"), x_long.to("neuron"), None).cpu()[:n]
    assert torch.equal(got.isnan(), cpu.isnan()) and torch.equal(got.signbit() | got.isnan(), cpu.signbit() | cpu.isnan())
    torch.testing.assert_close(got, cpu, rtol=0 if dtype == torch.float32 else torch.finfo(dtype).eps, atol=0,
                               equal_nan=True)


@pytest.mark.parametrize("dtype", [torch.float32] + LOW)
def test_logit_autograd_matches_cpu(dtype):
    x = torch.tensor([0.01, 0.2, 0.5, 0.7, 0.99] * 4).to(dtype)
    grads = {}
    for device in ("cpu", "neuron"):
        leaf = x.clone().to(device).requires_grad_()
        torch.logit(leaf, eps=0.05).sum().backward()
        grads[device] = leaf.grad.cpu()
    # float32 opmath rounded once; the CPU's float16 loop rounds in between (one ulp apart)
    assert torch.equal(grads["neuron"], _logit_backward_cuda(torch.ones_like(x), x, 0.05))
    torch.testing.assert_close(grads["neuron"], grads["cpu"], rtol=torch.finfo(dtype).eps, atol=0)


def test_float64_backward_runs_on_the_autograd_thread(quiet):
    # the 64-bit route looks at the Python stack; the autograd engine's device thread has almost none
    x = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    leaf = x.to("neuron").requires_grad_()
    torch.logit(leaf).backward(torch.ones(3, dtype=torch.float64, device="neuron"))
    torch.testing.assert_close(leaf.grad.cpu(), 1 / (x * (1 - x)), rtol=1e-6, atol=0)


@pytest.mark.parametrize("dtype", [torch.float32] + LOW)
@pytest.mark.parametrize("mode", ["sum", "mean"])
@pytest.mark.parametrize("padding_idx", [None, 3])
@pytest.mark.parametrize("two_dim", [False, True])
def test_embedding_bag_scale_grad_by_freq_matches_cpu(dtype, mode, padding_idx, two_dim):
    def run(device):
        gen = torch.Generator().manual_seed(0)
        weight = torch.randn(20, 5, generator=gen).to(dtype).to(device).requires_grad_()
        if two_dim:
            indices, offsets = torch.randint(0, 20, (6, 4), generator=gen).to(device), None
        else:
            indices = torch.randint(0, 20, (30,), generator=gen).to(device)
            offsets = torch.tensor([0, 4, 7, 7, 20]).to(device)
        out = F.embedding_bag(indices, weight, offsets, mode=mode, scale_grad_by_freq=True, padding_idx=padding_idx)
        out.backward(torch.randn(out.shape, generator=gen).to(dtype).to(device))
        return out.detach().cpu(), weight.grad.cpu()

    for got, want in zip(run("neuron"), run("cpu")):
        assert torch.equal(got, want)


def _grid_sample(device, dtype, dims, mode, padding_mode, align_corners, compute_dtype=None):
    """Forward and backward of grid_sample on data representable in `dtype`, computed in compute_dtype."""
    gen = torch.Generator().manual_seed(0)
    compute_dtype = compute_dtype or dtype
    shape, grid_shape = ((2, 3, 5, 6), (2, 4, 7, 2)) if dims == 2 else ((2, 3, 4, 5, 6), (2, 3, 4, 5, 3))
    x = torch.randn(shape, generator=gen).to(dtype).to(compute_dtype).to(device).requires_grad_()
    grid = (torch.rand(grid_shape, generator=gen) * 2.4 - 1.2).to(dtype).to(compute_dtype).to(device)
    grid.requires_grad_()
    y = F.grid_sample(x, grid, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
    y.backward(torch.randn(y.shape, generator=gen).to(dtype).to(compute_dtype).to(device))
    return [t.cpu().float() for t in (y.detach(), x.grad, grid.grad)]


def _max_errors(results, reference):
    return [float((r - ref).abs().max()) for r, ref in zip(results, reference)]


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("dims,mode", [(2, "bilinear"), (2, "nearest"), (2, "bicubic"), (3, "bilinear"),
                                       (3, "nearest")])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sampler_low_precision_rounds_the_float32_result_once(dtype, dims, mode, padding_mode):
    # The CPU computes coordinates and weights in the low precision: its bf16 grid gradient is off by
    # whole units. The device computes in float32 and rounds each result once, as an accelerator does.
    got = _grid_sample("neuron", dtype, dims, mode, padding_mode, False)
    reference = _grid_sample("cpu", dtype, dims, mode, padding_mode, False, compute_dtype=torch.float32)
    cpu = _grid_sample("cpu", dtype, dims, mode, padding_mode, False)
    for err, cpu_err, ref in zip(_max_errors(got, reference), _max_errors(cpu, reference), reference):
        half_ulp = torch.finfo(dtype).eps / 2 * max(1.0, float(ref.abs().max()))
        assert err <= half_ulp and err <= cpu_err + half_ulp, (err, cpu_err)


def test_the_cpu_bf16_grid_gradient_is_what_the_device_corrects():
    reference = _grid_sample("cpu", torch.bfloat16, 2, "bilinear", "zeros", False, compute_dtype=torch.float32)
    cpu = _grid_sample("cpu", torch.bfloat16, 2, "bilinear", "zeros", False)
    assert _max_errors(cpu, reference)[2] > 1.0  # if PyTorch fixes its kernel, the fix can go


@pytest.mark.parametrize("dims", [2, 3])
def test_grid_sampler_float32_matches_cpu_exactly(dims):
    got = _grid_sample("neuron", torch.float32, dims, "bilinear", "zeros", True)
    want = _grid_sample("cpu", torch.float32, dims, "bilinear", "zeros", True)
    for g, w in zip(got, want):
        assert torch.equal(g, w)


# The orthogonal-polynomial families whose CPU recurrences return an uninitialized value at x = NaN, n >= 2.
POLYNOMIALS = ["chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w", "laguerre_polynomial_l",
               "legendre_polynomial_p", "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u",
               "shifted_chebyshev_polynomial_v", "shifted_chebyshev_polynomial_w"]
POLYNOMIAL_X = [float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 0.25, 0.5, 1.0, -1.0, 2.0, -3.0, 1e10, 0.75]
POLYNOMIAL_N = [0.0, 1.0, 2.0, 2.5, 3.0, 6.0, 7.0, 30.0, -1.0, float("nan"), float("inf")]


def _polynomial_calls(family, dtype):
    """(overload, call) pairs: every overload of the family, out= ones with empty and with strided outputs."""
    op = getattr(torch.ops.aten, f"special_{family}")
    xs = torch.tensor(POLYNOMIAL_X, dtype=dtype)[:, None].expand(-1, len(POLYNOMIAL_N))
    ns = torch.tensor(POLYNOMIAL_N, dtype=dtype)[None, :].expand(len(POLYNOMIAL_X), -1)

    def strided(d):
        return torch.empty(len(POLYNOMIAL_N), 2 * len(POLYNOMIAL_X), dtype=dtype, device=d)[:, ::2].t()

    return [
        ("default", lambda d: op.default(xs.to(d), ns.to(d))),
        ("out", lambda d: op.out(xs.to(d), ns.to(d), out=torch.empty(0, dtype=dtype, device=d))),
        ("out, strided", lambda d: op.out(xs.to(d), ns.to(d), out=strided(d))),
        ("n_scalar", lambda d: op.n_scalar(xs[:, 0].to(d), 3)),
        ("n_scalar_out", lambda d: op.n_scalar_out(xs[:, 0].to(d), 7, out=torch.empty(0, dtype=dtype, device=d))),
        ("x_scalar", lambda d: op.x_scalar(float("nan"), ns[0].to(d))),
        ("x_scalar_out", lambda d: op.x_scalar_out(0.25, ns[0].to(d), out=torch.empty(0, dtype=dtype, device=d))),
    ]


def _undefined_on_cpu(overload):
    """Where the CPU's result is an uninitialized value: x = NaN with int(n) >= 2."""
    x = torch.tensor(POLYNOMIAL_X)[:, None]
    n = torch.tensor(POLYNOMIAL_N)[None, :]
    if overload.startswith("n_scalar"):
        n = torch.tensor(3.0 if overload == "n_scalar" else 7.0)
        return (x.isnan() & (n >= 2))[:, 0]
    if overload.startswith("x_scalar"):
        x = torch.tensor(float("nan") if overload == "x_scalar" else 0.25)
        return (x.isnan() & (n >= 2) & (n < 2**63))[0]
    return x.isnan() & (n >= 2) & (n < 2**63)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("family", POLYNOMIALS)
def test_orthogonal_polynomials_at_nan_are_nan_and_elsewhere_the_cpus(quiet, family, dtype):
    float32_calls = dict(_polynomial_calls(family, torch.float32))
    for overload, call in _polynomial_calls(family, dtype):
        undefined = _undefined_on_cpu(overload)
        for _ in range(3):  # first and queued calls
            want, got = call("cpu"), call("neuron")
            assert got.dtype == want.dtype and got.shape == want.shape and got.stride() == want.stride(), overload
            got = got.cpu()
            assert got[undefined].isnan().all(), overload
            if dtype == torch.float64:  # the 64-bit policy: float64 computes as float32 does, widened
                want = float32_calls[overload]("cpu").double()
            torch.testing.assert_close(got[~undefined], want[~undefined], equal_nan=True, atol=0, rtol=0,
                                       msg=lambda m: f"{family} {overload}: {m}")


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dims", [1, 2])
@pytest.mark.parametrize("output_mask", [[True, False, True], [False, False, True], [True, True, True],
                                         [False, True, False], [True, False, False]])
def test_convolution_backward_returns_only_the_gradients_output_mask_asks_for(output_mask, dims, transposed):
    """The CPU kernel also returns a weight gradient (4-D for a 1-d convolution) when output_mask asks for the bias
    gradient but not the weight's; the device returns None there, and the CPU's values for the rest."""
    g = torch.Generator().manual_seed(0)
    spatial = (10,) * dims
    x = torch.randn(2, 3, *spatial, generator=g)
    weight = torch.randn(*((3, 2) if transposed else (2, 3)), *(3,) * dims, generator=g)
    grad_output = torch.randn(2, 2, *spatial, generator=g)

    def gradients(device):
        return torch.ops.aten.convolution_backward(
            grad_output.to(device), x.to(device), weight.to(device), bias_sizes=[2], stride=(1,) * dims,
            padding=(1,) * dims, dilation=(1,) * dims, transposed=transposed, output_padding=(0,) * dims, groups=1,
            output_mask=output_mask)

    want = gradients("cpu")
    for _ in range(2):  # first and queued calls
        got = gradients("neuron")
        for wanted, device_gradient, cpu_gradient in zip(output_mask, got, want):
            if not wanted:
                assert device_gradient is None
            else:
                torch.testing.assert_close(device_gradient.cpu(), cpu_gradient)


@pytest.mark.parametrize("op", [torch.ops.aten._softmax.default, torch.ops.aten._log_softmax.default])
def test_softmax_half_to_float_computes_in_float32_and_its_gradient_in_float16(op):
    """The CPU refuses half_to_float=True; an accelerator reads the float16 input in float32 and returns float32,
    and the backward returns the input's float16 gradient."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 7, generator=g).half()
    weights = torch.randn(4, 7, generator=g)
    device_x = x.to("neuron").requires_grad_()
    got = op(device_x, 1, True)
    assert got.dtype == torch.float32 and got.device.type == "neuron"
    cpu_x = x.float().requires_grad_()
    want = op(cpu_x, 1, False)
    torch.testing.assert_close(got.cpu(), want, atol=0, rtol=0)
    (got * weights.to("neuron")).sum().backward()
    (want * weights).sum().backward()
    assert device_x.grad.dtype == torch.float16
    torch.testing.assert_close(device_x.grad.cpu(), cpu_x.grad.half(), atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("op", [torch.amax, torch.amin])
def test_amax_amin_into_an_out_of_another_dtype_raise_type_error_naming_the_dtypes(op):
    """As TorchNeuron: TypeError with the torch dtypes (the CPU kernel raises RuntimeError with Int / Float), and the
    message says what to pass; an out= of the input's dtype gets the CPU's values."""
    x = torch.randint(0, 10, (3, 4), dtype=torch.int32, generator=torch.Generator().manual_seed(0))
    with pytest.raises(TypeError, match=r"but got torch\.int32 for input's dtype and torch\.float32 for out's "
                                        r"dtype\. Pass an out= tensor of dtype torch\.int32"):
        op(x.to("neuron"), out=torch.empty((), device="neuron"))
    out = torch.empty((), dtype=torch.int32, device="neuron")
    assert op(x.to("neuron"), out=out) is out and torch.equal(out.cpu(), op(x))
