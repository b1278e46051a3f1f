"""Op accounting under TorchNeuron's names: an op call is tracked as "aten::name" for its default overload and
"aten::name.overload" for any other (ops/tracking.py tracked_name), in get_executed_ops(), get_fallback_ops(), the
fallback warning and the portability report alike; the composites, fused ops, factories and metadata ops
TorchNeuron runs as one op run on the device as that one tracked op (not as their parts), with the CPU's values
and dtypes."""
import warnings

import pytest
import torch
import torch.nn.functional as F

from localneuron.ops import tracking as op_tracking
from localneuron.report import portability


def executed_after(tracking, fn):
    """What fn() returned, and the executed ops it left, read after the device's queue has drained."""
    tracking.clear_op_tracking()
    result = fn()
    torch.neuron.synchronize()
    return result, tracking.get_executed_ops()


def assert_same(device_result, cpu_result):
    """Values, dtype and shape of the device's result are the CPU's (NaN where the CPU has NaN)."""
    device_results = device_result if isinstance(device_result, (tuple, list)) else (device_result,)
    cpu_results = cpu_result if isinstance(cpu_result, (tuple, list)) else (cpu_result,)
    assert len(device_results) == len(cpu_results)
    for d, c in zip(device_results, cpu_results):
        assert d.device.type == "neuron"
        assert d.dtype == c.dtype
        torch.testing.assert_close(d.cpu(), c, equal_nan=True)


# -- the naming rule --

def test_non_default_overloads_are_named_with_the_overload_and_default_ones_without(tracking):
    x = torch.tensor([[1.0, -2.0], [3.0, -4.0]])
    n = x.to("neuron")
    result, executed = executed_after(tracking, lambda: (torch.where(n > 0, n, n * 2).sum(dim=1), n.mm(n), n.relu()))
    assert {"aten::where.self", "aten::gt.Scalar", "aten::mul.Tensor", "aten::sum.dim_IntList", "aten::mm",
            "aten::relu"} <= set(executed)
    assert not {"aten::where", "aten::gt", "aten::mul", "aten::sum"} & set(executed)  # never the bare name as well
    assert_same(result, (torch.where(x > 0, x, x * 2).sum(dim=1), x.mm(x), x.relu()))


def test_tracked_name_is_the_dispatchers_operator_name():
    for op in (torch.ops.aten.where.self, torch.ops.aten.mm.default, torch.ops.aten.add.out):
        schema = op._schema
        expected = f"{schema.name}.{schema.overload_name}" if schema.overload_name else schema.name
        assert op_tracking.tracked_name(schema.name, schema.overload_name) == expected
    assert op_tracking.tracked_name("aten::mm", "") == "aten::mm"
    assert op_tracking.tracked_name("aten::cumsum", "out") == "aten::cumsum.out"


def test_fallback_list_warning_and_report_use_the_same_names(tracking, monkeypatch):
    from localneuron.ops import tracking as op_tracking

    monkeypatch.setattr(op_tracking, "_warned", set())  # a fallback warns once per process: an earlier test may have
    x = torch.tensor([3.0, 1.0, 2.0, 1.0])
    n = x.to("neuron")
    tracking.clear_op_tracking()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        drawn = torch.normal(n, 0.0)  # aten::normal.Tensor_float: a CPU fallback (no device RNG); std 0 gives the mean
        total = n.sum(dim=0)
    torch.neuron.synchronize()
    assert_same(drawn, torch.normal(x, 0.0))
    assert_same(total, x.sum(dim=0))
    assert tracking.get_fallback_ops() == ["aten::normal.Tensor_float"]
    assert any("Operator 'aten::normal.Tensor_float' executed via CPU fallback" in str(w.message) for w in caught)
    data = portability.collect()
    assert set(data["cpu_fallback_ops"]) == set(tracking.get_fallback_ops())
    assert set(data["native_ops"]) | set(data["native_ops_computed_in_32bit"]) == set(tracking.get_executed_ops())
    assert "aten::sum.dim_IntList" in data["native_ops"]
    assert set(data["estimated_device_seconds_by_op"]) <= (set(data["native_ops"]) | set(data["cpu_fallback_ops"])
                                                            | set(data["native_ops_computed_in_32bit"])
                                                            | set(data["view_ops"]))
    assert "aten::normal.Tensor_float" in data["estimated_device_seconds_by_op"]


# -- composites and fused ops TorchNeuron runs as one op --

SPECIALS = torch.tensor([1.0, -float("inf"), float("inf"), float("nan"), 0.0, -2.5])


@pytest.mark.parametrize("op, parts", [
    (torch.isfinite, {"aten::abs.out", "aten::ne.Scalar", "aten::eq.Tensor", "aten::mul.Tensor"}),
    (torch.isinf, {"aten::abs.out", "aten::eq.Scalar"}),
    (torch.isneginf, set()),
], ids=lambda v: getattr(v, "__name__", ""))
def test_float_classification_runs_as_one_op(tracking, op, parts):
    for dtype in (torch.float32, torch.bfloat16, torch.int32):
        x = SPECIALS.to(dtype) if dtype.is_floating_point else torch.tensor([1, -3, 0], dtype=dtype)
        result, executed = executed_after(tracking, lambda: op(x.to("neuron")))
        assert_same(result, op(x))
        assert f"aten::{op.__name__}" in executed
        assert not parts & set(executed)


def test_max_along_a_dim_backward_is_one_value_selecting_reduction_backward(tracking):
    x = torch.tensor([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]], requires_grad=True)
    n = x.detach().to("neuron").requires_grad_()
    weights = torch.tensor([2.0, 3.0])
    x.max(dim=1).values.mul(weights).sum().backward()
    tracking.clear_op_tracking()
    n.max(dim=1).values.mul(weights.to("neuron")).sum().backward()
    torch.neuron.synchronize()
    executed = tracking.get_executed_ops()
    assert "aten::value_selecting_reduction_backward" in executed
    assert not {"aten::scatter.src", "aten::scatter_.src"} & set(executed)
    assert_same(n.grad, x.grad)


def test_fused_rms_norm_runs_as_one_op_forward_and_backward(tracking):
    x = torch.randn(3, 8, generator=torch.Generator().manual_seed(0))
    weight = torch.rand(8, generator=torch.Generator().manual_seed(1)) + 0.5
    cpu = torch.ops.aten._fused_rms_norm(x, [8], weight, 1e-5)
    result, executed = executed_after(
        tracking, lambda: torch.ops.aten._fused_rms_norm(x.to("neuron"), [8], weight.to("neuron"), 1e-5))
    assert "aten::_fused_rms_norm" in executed
    assert not {"aten::rsqrt", "aten::mean.dim", "aten::pow.Tensor_Scalar"} & set(executed)
    assert_same(result, cpu)
    # the gradient of the one op is the CPU's
    xc, wc = x.clone().requires_grad_(), weight.clone().requires_grad_()
    torch.ops.aten._fused_rms_norm(xc, [8], wc, 1e-5)[0].square().sum().backward()
    xn, wn = x.to("neuron").requires_grad_(), weight.to("neuron").requires_grad_()
    torch.ops.aten._fused_rms_norm(xn, [8], wn, 1e-5)[0].square().sum().backward()
    assert_same((xn.grad, wn.grad), (xc.grad, wc.grad))


@pytest.mark.parametrize("input_dtype,weight_dtype", [
    (torch.bfloat16, torch.float32), (torch.float16, torch.float32), (torch.float32, torch.bfloat16),
    (torch.bfloat16, torch.bfloat16), (torch.bfloat16, None)])
def test_rms_norm_is_one_fused_rms_norm_whatever_the_dtypes(tracking, input_dtype, weight_dtype):
    """TorchNeuron registers rms_norm itself: one _fused_rms_norm and its backward even when the input's and the
    weight's dtypes differ (PyTorch's composite code then decomposes it, with a warning); the values and dtypes are
    the CPU's, the weight's gradient unrounded in the weight's dtype."""
    g = torch.Generator().manual_seed(2)
    x = torch.randn(5, 3, 8, generator=g).to(input_dtype)
    weight = None if weight_dtype is None else torch.randn(3, 8, generator=g).to(weight_dtype)
    grad = torch.randn(5, 3, 8, generator=g).to(input_dtype)
    xc, wc = x.clone().requires_grad_(), None if weight is None else weight.clone().requires_grad_()
    xn, wn = x.to("neuron").requires_grad_(), None if weight is None else weight.to("neuron").requires_grad_()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Mismatch dtype between input and weight")
        cpu = F.rms_norm(xc, (3, 8), wc, 1e-5)
    tracking.clear_op_tracking()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "Cannot dispatch to fused implementation" on the device
        result = F.rms_norm(xn, (3, 8), wn, 1e-5)
    torch.neuron.synchronize()
    assert "aten::_fused_rms_norm" in tracking.get_executed_ops()
    assert not {"aten::rsqrt", "aten::mean.dim", "aten::pow.Tensor_Scalar"} & set(tracking.get_executed_ops())
    assert_same(result.detach(), cpu.detach())
    cpu.backward(grad)
    tracking.clear_op_tracking()
    result.backward(grad.to("neuron"))
    torch.neuron.synchronize()
    assert "aten::_fused_rms_norm_backward" in tracking.get_executed_ops()
    assert_same(xn.grad, xc.grad)
    if weight is not None:
        assert_same(wn.grad, wc.grad)


def test_rms_norm_refuses_mismatched_shapes_as_the_cpu_does():
    for args in (((3, 4), (5,), None), ((3, 4), (4,), (5,)), ((3, 4), (), None)):
        shape, normalized, weight_shape = args
        messages = []
        for device in ("cpu", "neuron"):
            weight = None if weight_shape is None else torch.ones(weight_shape, device=device)
            with pytest.raises(RuntimeError) as error:
                F.rms_norm(torch.ones(shape, device=device), normalized, weight)
            messages.append(str(error.value).splitlines()[0])
        assert messages[0] == messages[1]


@pytest.mark.parametrize("where", ["whole", "after a slice", "beside an index tensor"])
@pytest.mark.parametrize("selects", ["nothing", "some"])
def test_boolean_mask_index_runs_nonzero_then_index_or_nothing(tracking, where, selects):
    """x[mask] as TorchNeuron runs it: aten::nonzero turns the mask into index tensors, then aten::index.Tensor runs
    on them; a mask that selects nothing gives the empty result with no index kernel run. Values and shapes are the
    CPU's."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(3, 4, 5, generator=g)
    mask_shape = (4, 5) if where == "after a slice" else (3, 4, 5) if where == "whole" else (3,)
    mask = torch.rand(mask_shape, generator=g) > 0.5 if selects == "some" else torch.zeros(mask_shape, dtype=torch.bool)
    if selects == "some":
        mask.view(-1)[0] = True
    rows = torch.tensor([0, 2, 4])

    def index(t, m, r):
        return t[m] if where == "whole" else t[:, m] if where == "after a slice" else t[m, :, r]

    if where == "beside an index tensor":
        rows = rows[:1]
    cpu = index(x, mask, rows)
    result, executed = executed_after(tracking, lambda: index(x.to("neuron"), mask.to("neuron"), rows.to("neuron")))
    assert "aten::nonzero" in executed
    assert ("aten::index.Tensor" in executed) == (selects == "some")
    assert_same(result, cpu)


def test_boolean_mask_index_keeps_the_cpu_errors_and_gradient():
    for device in ("cpu", "neuron"):
        with pytest.raises(IndexError, match=r"The shape of the mask \[4\] at index 0 does not match"):
            torch.zeros(3, 4, device=device)[torch.ones(4, dtype=torch.bool, device=device)]
    x = torch.randn(3, 4, generator=torch.Generator().manual_seed(5))
    mask = x > 0
    xc, xn = x.clone().requires_grad_(), x.to("neuron").requires_grad_()
    xc[mask].square().sum().backward()
    xn[mask.to("neuron")].square().sum().backward()
    assert_same(xn.grad, xc.grad)
    xn.grad = None
    xn[torch.zeros_like(mask).to("neuron")].sum().backward()
    assert_same(xn.grad, torch.zeros(3, 4))


@pytest.mark.parametrize("how", ["x[mask] = 2.5", "one-element values", "after a None", "0-dim values"])
def test_boolean_mask_index_put_with_one_value_is_one_masked_fill_that_waits_for_nothing(tracking, how):
    """index_put_ with a single boolean mask and a one-element value is TorchNeuron's masked fill: one
    aten::_index_put_impl_ (tracked so, the suite's aten::index_put), no aten::nonzero; the CPU's values."""
    g = torch.Generator().manual_seed(6)
    x = torch.randn(3, 4, generator=g)
    mask = torch.rand(4 if how == "after a None" else (3, 4), generator=g) > 0.5
    value = torch.tensor(2.5) if how == "0-dim values" else torch.tensor([2.5])

    def put(t, m, v):
        if how == "x[mask] = 2.5":
            t[m] = 2.5
            return t
        return torch.ops.aten.index_put_(t, [None, m] if how == "after a None" else [m], v)

    cpu = put(x.clone(), mask, value)
    result, executed = executed_after(tracking, lambda: put(x.to("neuron"), mask.to("neuron"), value.to("neuron")))
    assert "aten::_index_put_impl_" in executed and "aten::nonzero" not in executed
    assert_same(result, cpu)


@pytest.mark.parametrize("how", ["beside an index tensor", "several values", "accumulate", "two masks"])
def test_boolean_mask_index_put_converts_the_mask_at_the_call(tracking, how):
    """Any other index_put_ with a boolean mask turns the mask into index tensors at the call (aten::nonzero), then
    runs aten::_index_put_impl_ on them; the CPU's values and gradients."""
    g = torch.Generator().manual_seed(7)
    x = torch.randn(3, 4, generator=g)
    rows = torch.tensor([True, False, True])
    indices = {"beside an index tensor": (rows, torch.tensor([1, 3])), "several values": (rows,),
               "accumulate": (rows,), "two masks": (rows, torch.tensor([True, False, False, True]))}[how]
    values = torch.randn(2, 4 if how in ("several values", "accumulate") else 1, generator=g).squeeze(-1)
    accumulate = how == "accumulate"
    cpu = x.clone().index_put_(indices, values, accumulate=accumulate)
    result, executed = executed_after(tracking, lambda: x.to("neuron").index_put_(
        tuple(i.to("neuron") for i in indices), values.to("neuron"), accumulate=accumulate))
    assert {"aten::nonzero", "aten::_index_put_impl_"} <= set(executed)
    assert_same(result, cpu)
    xc, vc = x.clone().requires_grad_(), values.clone().requires_grad_()
    xn, vn = x.to("neuron").requires_grad_(), values.to("neuron").requires_grad_()
    (xc * 1).index_put(indices, vc * 2, accumulate=accumulate).square().sum().backward()
    (xn * 1).index_put(tuple(i.to("neuron") for i in indices), vn * 2, accumulate=accumulate).square().sum().backward()
    assert_same((xn.grad, vn.grad), (xc.grad, vc.grad))


def test_boolean_mask_index_put_raises_the_cpus_broadcast_error_at_the_op():
    """Whether a mask's True positions broadcast with the other indices depends on its values, not its shape: the
    error is PyTorch's IndexError at the call in both modes, even after a call of the same shapes that fitted."""
    x = torch.zeros(3, 4, 5, device="neuron")
    value = torch.tensor([1.0], device="neuron")
    columns = torch.tensor([0, 1], device="neuron")
    x.index_put_((torch.tensor([True, False, True], device="neuron"), columns), value)  # 2 with 2: fits
    for device in ("cpu", "neuron"):
        with pytest.raises(IndexError, match=r"shape mismatch: indexing tensors could not be broadcast together "
                                             r"with shapes \[3\], \[2\]"):
            x.to(device).index_put_((torch.tensor([True, True, True], device=device), columns.to(device)),
                                    value.to(device))
    torch.neuron.synchronize()  # nothing failed in the queue
    assert_same(x, torch.zeros(3, 4, 5).index_put_((torch.tensor([0, 2]), torch.tensor([0, 1])), torch.tensor(1.0)))


def test_grouped_mm_runs_as_one_op_not_as_mm_per_group(tracking):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(6, 8, generator=g).bfloat16()  # rows of a grouped by the offsets, one weight each
    b = torch.randn(2, 8, 8, generator=g).bfloat16()
    offsets = torch.tensor([2, 6], dtype=torch.int32)
    cpu = torch._grouped_mm(a, b, offs=offsets)
    on_device = [t.to("neuron") for t in (a, b, offsets)]
    result, executed = executed_after(
        tracking, lambda: torch._grouped_mm(on_device[0], on_device[1], offs=on_device[2]))
    assert "aten::_grouped_mm" in executed
    assert not {"aten::mm", "aten::mm.out"} & set(executed)
    assert_same(result, cpu)


def test_grouped_mm_is_priced_as_its_gemms():
    from localneuron.costmodel.engines import Matmul, rule
    assert rule("aten::_grouped_mm") == Matmul("grouped_mm")


def _channel_stats(x, eps):
    dims = [0] + list(range(2, x.dim()))
    mean = x.mean(dims)
    return mean, (x.var(dims, unbiased=False) + eps).rsqrt()


def test_sync_batch_norm_kernels_run_as_one_op_each(tracking):
    """The CUDA-only kernels nn.SyncBatchNorm calls, against the batch-norm statistics computed on the CPU."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 3, 5, generator=g)
    weight, bias = torch.rand(3, generator=g) + 0.5, torch.randn(3, generator=g)
    eps = 1e-5
    mean, invstd = _channel_stats(x, eps)
    grad_out = torch.randn(4, 3, 5, generator=g)
    n, w, b, dy = (t.to("neuron") for t in (x, weight, bias, grad_out))
    counts = torch.tensor([20.0], device="neuron")
    counts_int = torch.tensor([20], dtype=torch.int32, device="neuron")

    stats, executed = executed_after(tracking, lambda: torch.batch_norm_stats(n, eps))
    assert executed == ["aten::batch_norm_stats"]
    assert_same(stats, (mean, invstd))

    gathered, executed = executed_after(tracking, lambda: torch.batch_norm_gather_stats_with_counts(
        n, stats[0][None], stats[1][None], None, None, 0.1, eps, counts))
    assert executed == ["aten::batch_norm_gather_stats_with_counts"]
    assert_same(gathered, (mean, invstd))

    normalized, executed = executed_after(tracking, lambda: torch.batch_norm_elemt(n, w, b, stats[0], stats[1], eps))
    assert executed == ["aten::batch_norm_elemt"]
    expected = (x - mean[:, None]) * invstd[:, None] * weight[:, None] + bias[:, None]
    assert_same(normalized, expected)

    reduced, executed = executed_after(tracking, lambda: torch.batch_norm_backward_reduce(
        dy, n, stats[0], stats[1], w, True, True, True))
    assert executed == ["aten::batch_norm_backward_reduce"]
    x_mu = x - mean[:, None]
    sum_dy, sum_dy_xmu = grad_out.sum((0, 2)), (grad_out * x_mu).sum((0, 2))
    assert_same(reduced, (sum_dy, sum_dy_xmu, sum_dy_xmu * invstd, sum_dy))

    grad_in, executed = executed_after(tracking, lambda: torch.batch_norm_backward_elemt(
        dy, n, stats[0], stats[1], w, reduced[0], reduced[1], counts_int))
    assert executed == ["aten::batch_norm_backward_elemt"]
    count = 20
    expected = (grad_out - sum_dy[:, None] / count - x_mu * (invstd ** 2 * sum_dy_xmu / count)[:, None]) \
        * (invstd * weight)[:, None]
    assert_same(grad_in, expected)


# -- factories and metadata ops: counted on the device when TorchNeuron counts them --

@pytest.mark.parametrize("name, make", [
    ("aten::scalar_tensor", lambda device: torch.scalar_tensor(2.5, dtype=torch.bfloat16, device=device)),
    ("aten::full", lambda device: torch.full((2, 3), 7, dtype=torch.int32, device=device)),
    ("aten::full", lambda device: torch.full((4,), -1.5, device=device)),
    ("aten::empty.memory_format", lambda device: torch.empty(2, 3, device=device).fill_(4.0)),
    ("aten::empty_strided", lambda device: torch.empty_strided((2, 3), (1, 2), device=device).zero_()),
    ("aten::zero_", lambda device: torch.ones(3, device=device).zero_()),
    ("aten::fill_.Scalar", lambda device: torch.zeros(3, dtype=torch.int64, device=device).fill_(9)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_factories_run_on_the_device_as_one_tracked_op(tracking, name, make):
    result, executed = executed_after(tracking, lambda: make("neuron"))
    assert name in executed
    assert_same(result, make("cpu"))


@pytest.mark.parametrize("name, make, source", [
    ("aten::zeros", lambda _: torch.zeros(2, 3, device=_.device), torch.empty(0)),
    ("aten::zeros", lambda _: torch.zeros((), dtype=torch.bool, device=_.device), torch.empty(0)),
    ("aten::ones_like", lambda x: torch.ones_like(x.t()), torch.arange(6.0).reshape(2, 3)),
    ("aten::ones_like", lambda x: torch.ones_like(x, dtype=torch.float16), torch.zeros(3, dtype=torch.int64)),
], ids=lambda v: v if isinstance(v, str) else "")
def test_zeros_and_ones_like_run_whole_not_as_an_allocation_and_a_fill(tracking, name, make, source):
    """`source` gives the device (and, for ones_like, the tensor whose shape, dtype and strides it copies)."""
    on_device = source.to("neuron")
    result, executed = executed_after(tracking, lambda: make(on_device))
    assert name in executed
    assert not {"aten::zero_", "aten::fill_.Scalar", "aten::empty.memory_format", "aten::empty_strided"} & set(
        executed)
    assert_same(result, make(source))
    assert result.stride() == make(source).stride()


def test_a_factory_run_whole_keeps_the_device_its_call_names(tracking):
    n = torch.arange(6.0).reshape(2, 3).to("neuron")
    on_host = torch.ones_like(n, device="cpu")
    torch.testing.assert_close(on_host, torch.ones(2, 3), rtol=0, atol=0)
    assert on_host.device.type == "cpu"
    other_core = torch.ones_like(n, device="neuron:1", dtype=torch.int32)
    assert other_core.device == torch.device("neuron:1") and other_core.dtype == torch.int32
    torch.testing.assert_close(other_core.cpu(), torch.ones(2, 3, dtype=torch.int32), rtol=0, atol=0)
    assert torch.zeros(2, device="neuron:1").device == torch.device("neuron:1")
    leaf = torch.zeros(2, 3, device="neuron", requires_grad=True)
    leaf.mul(torch.arange(6.0).reshape(2, 3).to("neuron")).sum().backward()
    assert leaf.grad_fn is None and leaf.is_leaf
    torch.testing.assert_close(leaf.grad.cpu(), torch.arange(6.0).reshape(2, 3))


@pytest.mark.parametrize("num_classes", [-1, 5])
def test_one_hot_runs_as_one_op(tracking, num_classes):
    for values in ([0, 2, 1], [3, 0, 3, 1]):  # inferred classes: the output's width follows the data
        x = torch.tensor(values)
        result, executed = executed_after(tracking, lambda: F.one_hot(x.to("neuron"), num_classes))
        assert "aten::one_hot" in executed
        assert not {"aten::scatter_.value", "aten::zeros", "aten::max"} & set(executed)
        assert_same(result, F.one_hot(x, num_classes))


INDEX_SELECT_CASES = [((5, 3), 0, [0, 2, 2]), ((2, 4, 3), 1, [3, 0]), ((4, 3), -1, [])]


@pytest.mark.parametrize("sizes, dim, indices", INDEX_SELECT_CASES)
def test_index_select_backward_runs_as_one_op(tracking, sizes, dim, indices):
    index = torch.tensor(indices, dtype=torch.long)
    grad_sizes = list(sizes)
    grad_sizes[dim] = len(indices)
    grad = torch.randn(grad_sizes, generator=torch.Generator().manual_seed(0)).bfloat16()
    result, executed = executed_after(tracking, lambda: torch.ops.aten.index_select_backward(
        grad.to("neuron"), sizes, dim, index.to("neuron")))
    assert "aten::index_select_backward" in executed
    assert not {"aten::index_add_", "aten::index_add", "aten::zeros", "aten::zero_"} & set(executed)
    assert_same(result, torch.ops.aten.index_select_backward(grad, sizes, dim, index))


def test_index_select_keeps_its_double_backward(tracking):
    """index_select_backward has no autograd kernel of its own: run whole, PyTorch's autograd fallback would let a
    double backward drop its path silently (here the gradient of g would miss gx's share); it runs its decomposition
    while its gradient is recorded, and whole in a plain backward."""
    def gradients(device):
        x = torch.arange(15.0).reshape(5, 3).to(device).requires_grad_()
        g = torch.arange(9.0).reshape(3, 3).to(device).requires_grad_()
        index = torch.tensor([0, 2, 2]).to(device)
        gx, = torch.autograd.grad(torch.index_select(x, 0, index), x, g, create_graph=True)
        gg, = torch.autograd.grad(gx.square().sum() + g.sum(), g)
        return gx.detach(), gg

    assert_same(gradients("neuron"), gradients("cpu"))
    x = torch.ones(5, 3, device="neuron", requires_grad=True)
    _, executed = executed_after(
        tracking, lambda: torch.index_select(x, 0, torch.tensor([1, 4], device="neuron")).sum().backward())
    assert "aten::index_select_backward" in executed
    assert "aten::index_add_" not in executed


# -- out= and in-place forms: tracked under the kernel TorchNeuron runs for them --

@pytest.mark.parametrize("name, make, start", [
    ("aten::full.out", lambda out, _: torch.full((2, 3), 5.0, out=out), (2, 3)),
    ("aten::full.out", lambda out, _: torch.full((2, 3), 7, out=out), (1,)),  # resized, as on the CPU
    ("aten::ones.out", lambda out, _: torch.ones((2, 3), out=out), (1,)),
    ("aten::zeros.out", lambda out, _: torch.zeros((2, 3), out=out), (2, 3)),
    ("aten::zeros.out", lambda out, _: torch.zeros(4, out=out), (0,)),
    ("aten::stack.out", lambda out, inputs: torch.stack(inputs, dim=1, out=out), (0,)),
], ids=["full", "full-resized", "ones-resized", "zeros", "zeros-resized", "stack"])
def test_out_calls_of_ops_torchneuron_registers_in_out_form_run_as_that_one_op(tracking, name, make, start):
    """full(out=), ones(out=), zeros(out=) and stack(out=) run as their out= overload, one op (run=WHOLE_INCLUDING_OUT), not as
    its composite's parts (resize_ and fill_, cat.out): TorchNeuron registers those overloads."""
    inputs = [torch.arange(3.0), torch.ones(3)]
    on_device = [t.to("neuron") for t in inputs]
    out = torch.empty(start, device="neuron")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # resizing a non-empty out= warns, as on the CPU
        want = make(torch.empty(start), inputs)
        result, executed = executed_after(tracking, lambda: make(out, on_device))
    assert result is out
    assert executed == [name]
    assert_same(out, want)


@pytest.mark.parametrize("method", ["tril_", "triu_"])
@pytest.mark.parametrize("diagonal", [-1, 0, 2])
def test_in_place_tril_and_triu_run_their_out_kernel(tracking, method, diagonal):
    """x.tril_() runs tril.out writing into x (run=OUT_KERNEL), as TorchNeuron does; tril(x) still runs whole."""
    x = torch.arange(20.0).reshape(4, 5) - 7
    n = x.to("neuron")
    name = method.rstrip("_")
    result, executed = executed_after(tracking, lambda: getattr(n, method)(diagonal))
    assert result is n
    assert executed == [f"aten::{name}.out"]
    assert_same(n, getattr(x.clone(), method)(diagonal))
    view = torch.arange(9.0).reshape(3, 3).to("neuron").t()  # a non-contiguous argument is written in place
    getattr(view, method)(diagonal)
    assert_same(view, getattr(torch.arange(9.0).reshape(3, 3).t(), method)(diagonal))
    _, executed = executed_after(tracking, lambda: getattr(torch, name)(n, diagonal))
    assert executed == [f"aten::{name}"]


@pytest.mark.parametrize("make", [
    lambda device: torch.arange(5, device=device),
    lambda device: torch.arange(2, 9, device=device),
    lambda device: torch.arange(0, 5, 1, dtype=torch.float32, device=device),
    lambda device: torch.arange(5, -1, -1, dtype=torch.int32, device=device),
    lambda device: torch.arange(0.0, 1.0, 0.25, device=device),
], ids=["end", "start-end", "start-end-step", "negative-step", "float-step"])
def test_arange_is_tracked_as_the_kernel_torchneuron_runs(tracking, make):
    """Every arange overload runs whole (one queued op), listed as aten::arange.start_out (the record's tracked_as):
    the kernel TorchNeuron's composite arange calls and its trackers list."""
    result, executed = executed_after(tracking, lambda: make("neuron"))
    assert executed == ["aten::arange.start_out"]
    assert_same(result, make("cpu"))
    out = torch.empty(0, dtype=torch.int64, device="neuron")
    _, executed = executed_after(tracking, lambda: torch.arange(1, 4, out=out))
    assert executed == ["aten::arange.start_out"]
    assert_same(out, torch.arange(1, 4))


def test_new_empty_is_one_op_and_keeps_a_requested_device(tracking):
    n = torch.arange(6.0).reshape(2, 3).to("neuron")
    result, executed = executed_after(tracking, lambda: n.new_empty((4, 2), dtype=torch.float16))
    assert "aten::new_empty" in executed
    assert result.device.type == "neuron" and result.shape == (4, 2) and result.dtype == torch.float16
    on_host = n.new_empty((3,), device="cpu")
    assert on_host.device.type == "cpu" and on_host.shape == (3,)


def test_resize_item_and_copies_are_tracked(tracking):
    x = torch.arange(6.0)
    n = x.to("neuron")
    tracking.clear_op_tracking()
    n.resize_(2, 2)
    value = n[1, 1].item()
    back = n.cpu()
    executed = tracking.get_executed_ops()
    assert {"aten::resize_", "aten::_local_scalar_dense"} <= set(executed)
    assert value == x.resize_(2, 2)[1, 1].item()
    torch.testing.assert_close(back, x)
    assert tracking.get_fallback_ops() == []


def test_kernel_calls_are_counted_per_call_and_cleared(tracking):
    n = torch.ones(4, device="neuron")
    tracking.clear_op_tracking()
    for _ in range(3):
        n.sum().item()
    counts = op_tracking.op_counts()[op_tracking.NATIVE]
    assert counts["aten::_local_scalar_dense"] == 3
    tracking.clear_op_tracking()
    assert "aten::_local_scalar_dense" not in tracking.get_executed_ops()


def test_an_op_whose_result_has_no_gradient_stays_one_op_when_its_input_requires_grad(tracking):
    """isfinite and one_hot run whole under autograd too: a bool or integer result carries no gradient, so nothing
    needs their decomposition's graph (TorchNeuron's tests check aten::isfinite with requires_grad inputs)."""
    x = torch.tensor([1.0, float("inf"), float("nan"), -2.0], requires_grad=True)
    n = x.detach().to("neuron").requires_grad_()
    result, executed = executed_after(tracking, lambda: torch.isfinite(n))
    assert "aten::isfinite" in executed and not {"aten::abs", "aten::eq.Tensor", "aten::ne.Tensor"} & set(executed)
    assert_same(result, torch.isfinite(x))
    assert not result.requires_grad
