"""In-place add_ and mul_ take the unboxed fast path (op records' BINARY_ALPHA_IN_PLACE / BINARY_IN_PLACE forms,
csrc/executor/fast_ops.cpp) once the boxed path has run a call of their signature, and behave as the CPU does:
values, the tensor returned, version counters, views, broadcasting, Python numbers, errors at the call, and
writes that overlap what they read (run at the call by the boxed path, never queued)."""
import pytest
import torch

import torch_neuronx
from localneuron import _C
from localneuron.ops import tracking


def counters():
    hits, misses, _ = _C.executor_counters()
    return hits, misses


def test_repeated_in_place_calls_hit_the_executable_the_first_call_compiled():
    x = torch.ones(5, 3, device="neuron")
    y = torch.full((5, 3), 2.0, device="neuron")
    x.add_(y, alpha=0.5)  # the boxed path compiles and learns that add_ returns its first argument
    x.mul_(y)
    hits, misses = counters()
    for _ in range(20):
        assert x.add_(y, alpha=0.5) is x
        assert x.mul_(y) is x
    after_hits, after_misses = counters()
    assert after_misses == misses  # the fast path's signature is the boxed path's: no second executable
    assert after_hits - hits == 40
    expected = torch.ones(5, 3)
    for _ in range(21):
        expected.add_(torch.full((5, 3), 2.0), alpha=0.5).mul_(torch.full((5, 3), 2.0))
    torch.testing.assert_close(x.cpu(), expected)


def test_every_call_is_tracked_as_the_in_place_op():
    x = torch.ones(4, device="neuron")
    y = torch.ones(4, device="neuron")
    x.add_(y)
    x.mul_(y)
    torch_neuronx.clear_op_tracking()
    for _ in range(6):
        x.add_(y)
        x.mul_(y)
    torch.neuron.synchronize()
    add, mul = tracking.tracked_name("aten::add_", "Tensor"), tracking.tracked_name("aten::mul_", "Tensor")
    assert {add, mul} <= set(torch_neuronx.get_executed_ops())
    native = tracking.op_counts()[tracking.NATIVE]
    assert native[add] == 6 and native[mul] == 6, native


CASES = {
    "same shape, alpha": lambda x, y: x.add_(y, alpha=-1.5),
    "integer alpha": lambda x, y: x.add_(y, alpha=3),
    "python number": lambda x, y: x.add_(2.5),
    "python number mul": lambda x, y: x.mul_(0.5),
    "broadcast row": lambda x, y: x.add_(y[0]),
    "broadcast column": lambda x, y: x.mul_(y[:, :1]),
    "transposed self": lambda x, y: x.t().add_(y.t()),
    "strided self": lambda x, y: x[:, ::2].mul_(y[:, 1::2]),
    "self read fully": lambda x, y: x.add_(x),
    "self times itself": lambda x, y: x.mul_(x),
    "chained": lambda x, y: x.add_(y).mul_(y).add_(y, alpha=2),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32])
@pytest.mark.parametrize("case", CASES)
def test_in_place_results_and_versions_match_the_cpu(case, dtype):
    fn = CASES[case]
    if dtype == torch.int32 and case in ("same shape, alpha", "python number", "python number mul"):
        pytest.skip("a float alpha or number into an int tensor is the error case below")
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6).div(7).to(dtype)
    other = torch.arange(24, dtype=torch.float32).reshape(4, 6).flip(0).div(5).add(1).to(dtype)
    cpu_x, dev_x = base.clone(), base.to("neuron")
    cpu_y, dev_y = other.clone(), other.to("neuron")
    for _ in range(4):  # the first call compiles and runs boxed, the rest take the fast path (queued or in place)
        version = dev_x._version
        fn(cpu_x, cpu_y)
        fn(dev_x, dev_y)
        assert dev_x._version > version
    torch.testing.assert_close(dev_x.cpu(), cpu_x)
    torch.testing.assert_close(dev_y.cpu(), cpu_y)


def cpu_error(fn, *tensors):
    with pytest.raises(RuntimeError) as info:
        fn(*tensors)
    return str(info.value).splitlines()[0]


@pytest.mark.parametrize("make, fn", [
    (lambda: (torch.ones(6), None), lambda x, y: x[1:].add_(x[:-1])),      # partial overlap
    (lambda: (torch.ones(6), None), lambda x, y: x[:-1].mul_(x[1:])),
    (lambda: (torch.ones(3), None), lambda x, y: x.expand(4, 3).add_(1)),   # repeated elements
    (lambda: (torch.ones(4), torch.ones(3, 4)), lambda x, y: x.add_(y)),   # broadcast beyond self
    (lambda: (torch.ones(4, dtype=torch.int32), torch.ones(4)), lambda x, y: x.add_(y)),  # float into int
    (lambda: (torch.ones(4, dtype=torch.int32), None), lambda x, y: x.add_(x, alpha=0.5)),  # float alpha, int tensor
])
def test_refused_in_place_writes_raise_at_the_call_every_time(make, fn):
    x, y = make()
    message = cpu_error(fn, x, y)
    dev_y = y.to("neuron") if y is not None else None
    for _ in range(3):  # a refused call never teaches the fast path anything: each is refused at the call
        dev_x = x.to("neuron")
        with pytest.raises(RuntimeError) as info:
            fn(dev_x, dev_y)
        assert str(info.value).splitlines()[0] == message
    torch.neuron.synchronize()


def test_overlapping_write_after_harmless_calls_of_its_signature_still_raises_at_the_call():
    x = torch.arange(8.0, device="neuron")
    a, b = x[:4], x[4:]
    for _ in range(3):
        a.add_(b)  # same shapes and strides as the overlapping call below, no overlap
    with pytest.raises(RuntimeError, match="unsupported operation"):
        x[1:5].add_(x[0:4])
    torch.neuron.synchronize()


def test_a_leaf_that_requires_grad_refuses_and_autograd_records_in_place_updates():
    w = torch.ones(3, device="neuron", requires_grad=True)
    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        w.add_(1)
    h = w * 2
    for _ in range(3):
        h.mul_(torch.full((3,), 3.0, device="neuron"))
    h.sum().backward()
    torch.testing.assert_close(w.grad.cpu(), torch.full((3,), 54.0))
