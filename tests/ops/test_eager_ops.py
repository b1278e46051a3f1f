"""Eager execution: results, aliasing and metadata exactly as on CPU, and the executable cache."""
import re

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


def _im2col_out(x, out):
    return torch.ops.aten.im2col.out(x, [2, 2], [1, 1], [0, 0], [1, 1], out=out)


def _col2im_out(x, out):
    return torch.ops.aten.col2im.out(x, [4, 4], [2, 2], [1, 1], [0, 0], [1, 1], out=out)


IM2COL_READS_ITS_OWN_WRITES = pytest.mark.xfail(
    strict=False, reason="not fixed yet: the CPU's im2col resizes out= before it reads the input out= aliases, so it "
                         "reads what it already wrote; the device reads the input as it was (it matches the CPU "
                         "after some earlier tests in blocking mode, so the mark is not strict)")

# (name, call, input maker, out maker from the input): the out= argument is the input itself (im2col resizes it
# before reading it, so the CPU reads what it already wrote), or a view of the input's storage that overlaps it
# (which element-wise kernels refuse on the CPU: the device must refuse it too, not compute it).
ALIASED_OUT_CALLS = [
    pytest.param("im2col, out is the input", _im2col_out, lambda: torch.arange(72.0).reshape(1, 8, 9), lambda x: x,
                 marks=IM2COL_READS_ITS_OWN_WRITES),
    ("col2im, out is the input", _col2im_out, lambda: torch.arange(72.0).reshape(1, 8, 9), lambda x: x),
    pytest.param("im2col, out overlaps the input", lambda x, out: _im2col_out(x[:, :72].view(1, 8, 9), out),
                 lambda: torch.arange(400.0).reshape(1, 400), lambda x: x[0, 8:232].view(4, 56),
                 marks=IM2COL_READS_ITS_OWN_WRITES),
    ("add, out is a shifted view of the input", lambda x, out: torch.add(x[:-1], 1, out=out),
     lambda: torch.arange(9.0), lambda x: x[1:]),
    ("cumsum, out is the input", lambda x, out: torch.cumsum(x, 0, out=out), lambda: torch.arange(9.0), lambda x: x),
]


@pytest.mark.parametrize("name, call, make, out_of", ALIASED_OUT_CALLS,
                         ids=[c.values[0] if hasattr(c, "values") else c[0] for c in ALIASED_OUT_CALLS])
def test_out_argument_aliasing_an_input_reads_and_writes_as_on_cpu(name, call, make, out_of):
    for _ in range(3):  # first call (learns the signature) and queued calls
        cpu = make()
        try:
            cpu_result = call(cpu, out_of(cpu))
        except RuntimeError as error:
            assert "refer to a single memory location" in str(error)
            dev = make().to("neuron")
            with pytest.raises(RuntimeError, match="refer to a single memory location"):
                call(dev, out_of(dev))
            continue
        dev = make().to("neuron")
        dev_result = call(dev, out_of(dev))
        assert dev_result.shape == cpu_result.shape and dev_result.stride() == cpu_result.stride()
        same(dev_result, cpu_result)
        assert dev.shape == cpu.shape
        same(dev, cpu)


# Inputs whose size-1 dimensions make two layouts "contiguous" at once: the CPU's results follow their exact strides.
SIZE_ONE_SHAPES = [(2, 3, 1, 1), (2, 1, 4, 5), (1, 3, 4, 5), (2, 3, 1, 5)]
LAYOUT_OPS = {
    "add": lambda x: x + 1, "clone": lambda x: x.clone(), "where": lambda x: torch.where(x > 0, x, 0.0),
    "conv2d": lambda x: torch.nn.functional.conv2d(x, torch.ones(4, x.shape[1], 1, 1, device=x.device)),
    "max_pool2d": lambda x: torch.nn.functional.max_pool2d(x, 1), "cat": lambda x: torch.cat([x, x], 1),
    "transposed add": lambda x: x.transpose(1, 2) + 1, "sigmoid": torch.sigmoid,
}


@pytest.mark.parametrize("op", LAYOUT_OPS)
@pytest.mark.parametrize("shape", SIZE_ONE_SHAPES)
def test_result_strides_follow_the_inputs_exact_layout_in_any_call_order(op, shape):
    f = LAYOUT_OPS[op]
    formats = [torch.channels_last, torch.contiguous_format] * 2 + [torch.contiguous_format, torch.channels_last]
    for memory_format in formats:  # a layout learned from one input must not be reused for the other
        x = torch.randn(shape, generator=torch.Generator().manual_seed(1)).to(memory_format=memory_format)
        want, got = f(x), f(x.to("neuron"))
        assert got.stride() == want.stride(), (memory_format, got.stride(), want.stride())
        assert got.is_contiguous(memory_format=torch.channels_last) == want.is_contiguous(
            memory_format=torch.channels_last)
        same(got, want)


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


OPERANDS_OF_THE_WRONG_RANK = {
    "bmm 2-d first": lambda d: torch.bmm(torch.ones(2, 3, device=d), torch.ones(2, 3, 4, device=d)),
    "bmm 2-d second": lambda d: torch.bmm(torch.ones(2, 3, 4, device=d), torch.ones(4, 5, device=d)),
    "bmm 4-d": lambda d: torch.bmm(torch.ones(1, 2, 3, 4, device=d), torch.ones(2, 4, 5, device=d)),
    "baddbmm 2-d batch": lambda d: torch.baddbmm(torch.ones(2, 3, 4, device=d), torch.ones(3, 4, device=d),
                                                 torch.ones(2, 4, 4, device=d)),
    "mm 3-d": lambda d: torch.mm(torch.ones(2, 3, 4, device=d), torch.ones(4, 5, device=d)),
    "mm 1-d": lambda d: torch.mm(torch.ones(3, device=d), torch.ones(3, 5, device=d)),
}


@pytest.mark.parametrize("call", OPERANDS_OF_THE_WRONG_RANK.values(), ids=OPERANDS_OF_THE_WRONG_RANK)
def test_matmuls_with_an_operand_of_the_wrong_rank_raise_the_cpus_error(call):
    """The device prices an op before its kernel runs; an operand of the wrong rank must still get the kernel's
    own check (batch1 must be a 3D tensor...), not an error from the pricing."""
    with pytest.raises(Exception) as on_cpu:
        call("cpu")
    for _ in range(2):  # first and cached signature
        with pytest.raises(type(on_cpu.value), match=re.escape(str(on_cpu.value))):
            call("neuron")
            torch.neuron.synchronize()


def test_contiguous_takes_preserve_format_as_contiguous_format():
    """TorchNeuron's contiguous accepts torch.preserve_format (PyTorch's composite refuses it on every device) and
    returns the contiguous_format copy; gradients flow through it as through contiguous()."""
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(0))
    device_x = x.to("neuron").requires_grad_()
    got = device_x.t().contiguous(memory_format=torch.preserve_format)
    assert got.is_contiguous() and got.stride() == (3, 1)
    same(got, x.t().contiguous())
    contiguous = device_x.contiguous(memory_format=torch.preserve_format)
    assert contiguous is device_x
    (got * torch.arange(12.0, device="neuron").reshape(4, 3)).sum().backward()
    same(device_x.grad, torch.arange(12.0).reshape(4, 3).t())
