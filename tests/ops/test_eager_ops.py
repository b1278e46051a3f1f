"""Eager execution: results, aliasing and metadata exactly as on CPU, and the executable cache."""
import pytest
import torch

from localneuron import _C


def same(device_result, cpu_result):
    assert device_result.device.type == "neuron"
    torch.testing.assert_close(device_result.cpu(), cpu_result, rtol=0, atol=0)


def test_views_share_storage_and_keep_metadata():
    base = torch.arange(24.0).reshape(4, 6)
    n = base.to("neuron")
    for f in [lambda t: t.t(), lambda t: t[1:, ::2], lambda t: t.transpose(0, 1)[2], lambda t: t.view(6, 4),
              lambda t: t.unsqueeze(0).expand(3, 4, 6), lambda t: t.narrow(1, 2, 3), lambda t: t.diagonal()]:
        v, c = f(n), f(base)
        assert v.shape == c.shape and v.stride() == c.stride() and v.storage_offset() == c.storage_offset()
        assert v.untyped_storage().data_ptr() == n.untyped_storage().data_ptr()
        same(v, c)


def test_in_place_ops_write_through_views():
    c = torch.zeros(4, 4)
    n = c.to("neuron")
    for t in (c, n):
        t[1:3, ::2].add_(5)
        t.t()[0].mul_(2)
        t.diagonal().fill_(-1)
    same(n, c)


def test_out_arguments_including_resize():
    a, b = torch.randn(3, 4), torch.randn(3, 4)
    out_c, out_n = torch.empty(0), torch.empty(0, device="neuron")
    torch.add(a, b, out=out_c)
    result = torch.add(a.neuron(), b.neuron(), out=out_n)
    assert result is out_n and out_n.shape == (3, 4) and out_n.device.type == "neuron"
    same(out_n, out_c)
    values, indices = torch.empty(0, device="neuron"), torch.empty(0, dtype=torch.long, device="neuron")
    torch.max(a.neuron(), dim=1, out=(values, indices))
    same(values, a.max(dim=1).values)
    same(indices, a.max(dim=1).indices)


def test_non_contiguous_and_empty_tensors():
    c = torch.randn(5, 6).t()  # dense but transposed: .to() keeps its strides
    n = c.neuron()
    assert not n.is_contiguous() and n.stride() == c.stride()
    same(n.exp(), c.exp())
    same(n.contiguous(), c.contiguous())
    base = torch.randn(5, 6)
    sliced, sliced_ref = base.neuron()[:, ::2], base[:, ::2]
    assert sliced.stride() == sliced_ref.stride()
    same(sliced * 3, sliced_ref * 3)
    e = torch.empty(0, 3, device="neuron")
    assert (e + 1).shape == (0, 3) and e.sum(0).cpu().tolist() == [0.0, 0.0, 0.0]


def test_zero_dim_cpu_tensors_are_scalars_and_other_cpu_tensors_are_rejected():
    n = torch.ones(3, device="neuron")
    same(n * torch.tensor(2.0), torch.full((3,), 2.0))
    with pytest.raises(RuntimeError, match=r"Non-scalar tensor arg2 is on cpu device, expected neuron"):
        torch.where(n > 0, n, torch.ones(3))
    with pytest.raises(RuntimeError, match=r"Non-scalar tensor arg0 is on cpu device, expected neuron"):
        torch.cat([n, torch.ones(3)])
    with pytest.raises(RuntimeError, match=r"Non-scalar tensor arg1 is on cpu device, expected neuron"):
        n + torch.ones(3)
    with pytest.raises(RuntimeError, match="expected neuron"):
        n.set_(torch.ones(3))
    assert (n + 1).sum().item() == 6.0  # still usable


def test_item_tolist_and_cross_device_copies():
    c = torch.randn(2, 3)
    n = c.to("neuron:1")
    assert n.device == torch.device("neuron:1")
    m = n.to("neuron:2")
    assert m.device.index == 2
    same(m, c)
    assert n.sum().item() == pytest.approx(c.sum().item(), rel=1e-6)
    assert n.tolist() == c.tolist()


def test_each_op_signature_is_compiled_once_then_cached():
    x = torch.randn(7, 5, device="neuron")
    x.tanh()  # may compile
    hits0, misses0, _ = _C.executor_counters()
    for _ in range(10):
        x.tanh()
    hits1, misses1, _ = _C.executor_counters()
    assert misses1 == misses0 and hits1 - hits0 == 10
    torch.randn(7, 6, device="neuron", dtype=torch.bfloat16).tanh()  # new shape and dtype: a new executable
    _, misses2, _ = _C.executor_counters()
    assert misses2 == misses1 + 1 or misses2 > misses1


def test_ops_run_on_the_device_of_their_inputs():
    a = torch.randn(3, device="neuron:3")
    b = a * 2 + 1
    assert b.device == torch.device("neuron:3")
    before = torch.neuron.memory_allocated(3)
    c = a.exp()
    assert torch.neuron.memory_allocated(3) > before
    del c


def test_convolution_and_pooling_match_cpu():
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 4, 3, padding=1)
    x = torch.randn(2, 3, 8, 8)
    ref = torch.nn.functional.max_pool2d(conv(x), 2)
    out = torch.nn.functional.max_pool2d(conv.to("neuron")(x.to("neuron")), 2)
    torch.testing.assert_close(out.cpu(), ref)
