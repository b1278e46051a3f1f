"""Low-precision and integer semantics where the CPU kernel the device runs on refuses or miscomputes
what an accelerator accepts (localneuron/ops/host_kernel_fixes.py): histc on integers (MoE routers)
and in bf16/fp16, fused SGD in fp16/bf16, batch_norm with mixed float32/low-precision parameters.
The reference is the CPU computing the same thing in float32 (or float64 for integers)."""
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
