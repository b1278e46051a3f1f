"""An op whose operands live on two NeuronCores raises CUDA's error (copies between cores excepted),
on the first call of a signature and on every later one, and the portability report counts it."""
import re

import pytest
import torch
import torch.nn.functional as F

import torch_neuronx
from localneuron.report import portability

CUDA_TEXT = re.escape("Expected all tensors to be on the same device, but found at least two devices, neuron:0 and neuron:1!")


def operands():
    a = torch.arange(12.0).reshape(3, 4)
    return a.to("neuron:0"), a.to("neuron:1")


CROSS_DEVICE_OPS = {
    "aten::add": lambda a, b: a + b,
    "aten::mul": lambda a, b: torch.mul(a, b),
    "aten::add_": lambda a, b: a.add_(b),
    "aten::mm": lambda a, b: a @ b.t(),
    "aten::cat": lambda a, b: torch.cat([a, b]),
    "aten::where": lambda a, b: torch.where(a > 1, a, b),
    "aten::index": lambda a, b: a[torch.tensor([0, 2], device=b.device)],
    "aten::index_select": lambda a, b: a.index_select(0, torch.tensor([1], device=b.device)),
    "aten::index_put_": lambda a, b: a.index_put_((torch.tensor([0], device=a.device),), b[0]),
    "aten::linalg_solve": lambda a, b: torch.linalg.solve(a[:3, :3] + torch.eye(3, device=a.device), b[:3, :3]),
    "aten::sub": lambda a, b: a - b[0, 0],  # a 0-dim tensor on another core is no scalar (CUDA agrees)
}


@pytest.mark.parametrize("op", sorted(CROSS_DEVICE_OPS))
def test_operands_on_two_cores_raise_cudas_error_on_every_call(op, quiet):
    a, b = operands()
    for _ in range(2):  # the first call compiles the signature, the second hits the cache
        with pytest.raises(RuntimeError, match=CUDA_TEXT):
            CROSS_DEVICE_OPS[op](a, b)
    assert torch.equal(a.cpu(), torch.arange(12.0).reshape(3, 4))  # in-place ops left their input alone


def test_same_ops_on_one_core_still_run_and_match_the_cpu(quiet):
    a, _ = operands()
    b = a.clone()
    for op, fn in CROSS_DEVICE_OPS.items():
        expected = fn(a.cpu().clone(), b.cpu().clone())
        got = fn(a.clone(), b.clone())
        torch.testing.assert_close(got.cpu(), expected, msg=op)


def test_copies_between_cores_and_host_scalars_are_allowed():
    a, b = operands()
    assert torch.equal(a.copy_(b * 2).cpu(), torch.arange(12.0).reshape(3, 4) * 2)
    moved = b.to("neuron:0")
    assert moved.device == torch.device("neuron:0") and torch.equal(moved.cpu(), b.cpu())
    assert torch.equal((b + torch.tensor(1.0)).cpu(), b.cpu() + 1)  # 0-dim CPU tensors are scalars


def test_attention_across_cores_raises_pytorchs_own_device_check():
    a, b = operands()
    with pytest.raises(RuntimeError, match="Expected query, key, and value to have the same device"):
        F.scaled_dot_product_attention(a[None, None], b[None, None], a[None, None])


def test_foreach_lists_spanning_cores_are_refused_rather_than_answered_on_one_core():
    # PyTorch's optimizers group tensors by device before a foreach call; an ungrouped list would
    # otherwise get all its results on the first tensor's core.
    xs = [torch.ones(3, device="neuron:0"), torch.ones(3, device="neuron:1")]
    with pytest.raises(RuntimeError, match=CUDA_TEXT):
        torch._foreach_add(xs, xs)
    out = torch._foreach_add(xs[:1], xs[:1])
    assert out[0].device == torch.device("neuron:0") and torch.equal(out[0].cpu(), torch.full((3,), 2.0))


def test_the_portability_report_counts_refused_calls_and_not_as_executed(quiet):
    torch_neuronx.clear_op_tracking()
    a, b = operands()
    for _ in range(3):
        with pytest.raises(RuntimeError):
            torch.cat([a, b])
    with pytest.raises(RuntimeError):
        a @ b
    data = portability.collect()
    assert data["cross_device_errors"] == {"aten::cat": 3, "aten::mm": 1}
    assert "aten::cat" not in torch_neuronx.get_executed_ops()
    text = portability.render(data)
    assert "OPERANDS ON TWO NEURONCORES (raised, as CUDA does for two GPUs): 2 ops, 4 calls" in text
    torch_neuronx.clear_op_tracking()
    assert portability.collect()["cross_device_errors"] == {}
