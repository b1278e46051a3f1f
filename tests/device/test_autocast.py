"""torch.autocast(device_type="neuron") follows CUDA's casting lists."""
import pytest
import torch


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_autocast_casting_lists(dtype):
    a, b = torch.randn(8, 8, device="neuron"), torch.randn(8, 8, device="neuron")
    with torch.autocast(device_type="neuron", dtype=dtype):
        assert (a @ b).dtype == dtype                          # lower_precision_fp list
        assert torch.nn.functional.linear(a, b).dtype == dtype
        assert torch.softmax(a, 0).dtype == torch.float32      # fp32 list
        assert (a @ b).exp().dtype == torch.float32            # exp: fp32 list, even on a low-precision input
        assert torch.cat([a.to(dtype), b]).dtype == torch.float32  # promote list
        assert (a + b).dtype == torch.float32                  # untouched ops keep their types
    assert (a @ b).dtype == torch.float32


def test_autocast_matches_cuda_semantics_numerically():
    a, b = torch.randn(16, 16), torch.randn(16, 16)
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        out = a.neuron() @ b.neuron()
    torch.testing.assert_close(out.cpu(), (a.bfloat16() @ b.bfloat16()))


def test_autocast_bans_binary_cross_entropy():
    p, t = torch.rand(4, device="neuron"), torch.rand(4, device="neuron")
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            torch.nn.functional.binary_cross_entropy(p, t)


def test_training_step_under_autocast():
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1)).to("neuron")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with torch.autocast(device_type="neuron", dtype=torch.bfloat16):
        loss = model(torch.randn(16, 4, device="neuron")).float().pow(2).mean()
    loss.backward()
    optimizer.step()
    assert all(p.grad.dtype == torch.float32 for p in model.parameters())
