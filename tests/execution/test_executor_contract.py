"""The contract between the C++ executor and its Python policy (csrc/executor/executor_contract.h): one route
enum exported from C++, callbacks installed once, and a cache key that ignores float and string
arguments on purpose (one executable serves every value, and each call still computes with its own)."""
import pytest
import torch

from localneuron import _C
from localneuron.device import registration
from localneuron.ops import policy


def misses() -> int:
    return _C.executor_counters()[1]


def test_route_and_execution_enums_are_exported_from_cpp_and_used_by_the_policy():
    assert set(_C.Route.__members__) == {"DEVICE", "PYTHON", "DEVICE_WRAP_INT64"}
    assert set(_C.Execution.__members__) == {"SYNCHRONOUS", "QUEUED", "METADATA"}
    assert policy.Route is _C.Route
    route, execution, _, _ = policy.on_miss(torch.ops.aten.tanh.default, (torch.ones(2, device="neuron"),), {})
    assert route is _C.Route.DEVICE and execution is _C.Execution.QUEUED


@pytest.mark.parametrize("op, args, expected", [
    (torch.ops.aten.mul.Tensor, lambda d: (d, d), _C.Execution.QUEUED),
    (torch.ops.aten.add_.Tensor, lambda d: (d, d), _C.Execution.QUEUED),
    (torch.ops.aten.nonzero.default, lambda d: (d,), _C.Execution.SYNCHRONOUS),  # data-dependent shape
    (torch.ops.aten.unfold.default, lambda d: (d, 0, 2, 1), _C.Execution.METADATA),  # a view
    (torch.ops.aten.mul.out, lambda d: (d, d), _C.Execution.SYNCHRONOUS),  # out= may resize
    (torch.ops.aten.bernoulli.p, lambda d: (d, 0.5), _C.Execution.SYNCHRONOUS),  # a generator
    (torch.ops.aten.equal.default, lambda d: (d, d), _C.Execution.SYNCHRONOUS),  # a bool result
])
def test_execution_decisions(op, args, expected):
    d = torch.ones(4, device="neuron")
    kwargs = {"out": torch.empty(4, device="neuron")} if "out" in op._schema.overload_name else {}
    _, execution, _, _ = policy.on_miss(op, args(d), kwargs)
    assert execution is expected


def test_callbacks_are_installed_once():
    with pytest.raises(RuntimeError, match="already installed"):
        _C.install_executor(**registration.executor_contract())


def test_calls_differing_only_in_a_float_share_an_executable_and_compute_their_own_value():
    x = torch.randn(6, 3)
    d = x.to("neuron")
    torch.mul(d, 0.5)  # may compile
    before = misses()
    results = {v: torch.mul(d, v).cpu() for v in (0.25, 0.7, -3.5)}
    assert misses() == before
    for v, r in results.items():
        torch.testing.assert_close(r, torch.mul(x, v), rtol=0, atol=0)


def test_calls_differing_only_in_a_string_share_an_executable_and_compute_their_own_value():
    a, b = torch.randn(5, 4) * 10, torch.randn(5, 4)
    da, db = a.to("neuron"), b.to("neuron")
    torch.div(da, db, rounding_mode="floor")  # may compile
    before = misses()
    floor = torch.div(da, db, rounding_mode="floor").cpu()
    trunc = torch.div(da, db, rounding_mode="trunc").cpu()
    assert misses() == before
    assert torch.equal(floor, torch.div(a, b, rounding_mode="floor"))
    assert torch.equal(trunc, torch.div(a, b, rounding_mode="trunc"))
    assert not torch.equal(floor, trunc)


def test_int_arguments_are_part_of_the_signature():
    d = torch.randn(4, 5, device="neuron")
    d.sum(dim=0)  # may compile
    before = misses()
    d.sum(dim=0)
    assert misses() == before
    d.sum(dim=1)
    assert misses() == before + 1


def test_every_shape_has_a_signature_of_its_own():
    """Signatures are hashes: two shapes sharing one would share an executable and a learned output layout.
    The combiner once used sent ~6% of such broadcasting pairs to another pair's key (which pairs depends on
    where the op's schema lives in memory); each pair below runs twice, queued the second time."""
    sizes = (1, 2, 3, 4, 5, 8, 16, 64, 128)
    one = torch.ones(1, device="neuron")
    for rows in sizes:
        for columns in sizes:
            other = torch.ones(rows, columns, device="neuron")
            for _ in range(2):
                assert (one * other).shape == (rows, columns)
                assert torch.add(one, other, alpha=2).shape == (rows, columns)


def test_bool_list_arguments_are_part_of_the_signature():
    x = torch.randn(4, 8, 16, requires_grad=True)
    ln = torch.nn.LayerNorm(16)
    d, dln = x.detach().to("neuron").requires_grad_(), torch.nn.LayerNorm(16).to("neuron")
    dln.load_state_dict(ln.state_dict())
    for inputs_need_grad in (True, False):  # output_mask [True, True, True], then [False, True, True]
        d.requires_grad_(inputs_need_grad)
        x.requires_grad_(inputs_need_grad)
        ln.zero_grad()
        dln.zero_grad()
        ln(x).sum().backward()
        dln(d).sum().backward()
        torch.testing.assert_close(dln.weight.grad.cpu(), ln.weight.grad)
        if inputs_need_grad:
            torch.testing.assert_close(d.grad.cpu(), x.grad)


def test_profiler_callbacks_are_installed_once_too():
    from localneuron.profiler import kineto_bridge
    from localneuron.runtime import host_syncs

    with pytest.raises(RuntimeError, match="already installed"):
        _C.set_trace_builder(kineto_bridge.build)
    with pytest.raises(RuntimeError, match="already installed"):
        _C.set_host_sync_observer(host_syncs.observe)


# --- What the signature covers (csrc/executor/signature.h): exactly what sets a result's dtype and shape ---

PROMOTING_OPS = [torch.add, torch.sub, torch.mul, torch.div, torch.true_divide, torch.remainder, torch.fmod,
                 torch.floor_divide, torch.xlogy]


@pytest.fixture
def default_dtype():
    previous = torch.get_default_dtype()
    yield
    torch.set_default_dtype(previous)


def same_as_cpu(result, expected):
    assert result.dtype == expected.dtype and result.shape == expected.shape, (result.dtype, expected.dtype)
    torch.testing.assert_close(result.cpu(), expected, rtol=0, atol=0, equal_nan=True)


@pytest.mark.parametrize("op", PROMOTING_OPS, ids=lambda op: op.__name__)
@pytest.mark.parametrize("number_first", [True, False], ids=["number first", "0-dim first"])
def test_a_python_number_and_a_0_dim_tensor_of_another_dtype_each_keep_their_result_dtype(op, number_first):
    """int32 with 2.5 promotes to the default dtype; with a 0-dim float64 tensor to float64 (the tensor ranks
    above a number of its category). Either call first, each keeps its own dtype, queued or not."""
    x = torch.arange(1, 7, dtype=torch.int32)
    d = x.to("neuron")
    zero_dim = torch.tensor(2.5, dtype=torch.float64)
    calls = [lambda t: op(t, 2.5), lambda t: op(t, zero_dim)]
    for call in (calls if number_first else calls[::-1]) * 2:
        same_as_cpu(call(d), call(x))


def test_the_default_dtype_reaches_integer_promotion(default_dtype):
    x = torch.arange(1, 7, dtype=torch.int16)
    d = x.to("neuron")
    calls = [lambda t: t * 2.5, lambda t: t / t, lambda t: torch.sin(t), lambda t: t * 1j, lambda t: t.clamp(min=0.5)]
    for dtype in (torch.float32, torch.float64, torch.float32):
        torch.set_default_dtype(dtype)
        for call in calls:
            for _ in range(2):  # the first call of a signature runs when issued, the second is queued
                same_as_cpu(call(d), call(x))


@pytest.mark.parametrize("pool", ["avg_pool2d", "max_pool2d"])
def test_int_list_arguments_with_the_same_elements_split_differently_are_different_calls(pool):
    """[3], [1, 8] and [3, 1], [8] once shared a key: the second call got the first's output layout."""
    fn = getattr(torch.nn.functional, pool)
    x = torch.randn(1, 2, 12, 12)
    d = x.to("neuron")
    for kernel, stride in [([3], [1, 8]), ([3, 1], [8]), ([3], [1, 8]), ([3, 1], [8])]:
        same_as_cpu(fn(d, kernel, stride), fn(x, kernel, stride))


def test_conv2d_stride_and_padding_split_differently_are_different_calls():
    x, w = torch.randn(1, 2, 9, 9), torch.randn(3, 2, 3, 3)
    d, dw = x.to("neuron"), w.to("neuron")
    for stride, padding in [([1, 2], [1]), ([1], [2, 1]), ([1, 2], [1]), ([1], [2, 1])]:
        expected = torch.nn.functional.conv2d(x, w, None, stride, padding)
        result = torch.nn.functional.conv2d(d, dw, None, stride, padding)
        assert result.shape == expected.shape
        torch.testing.assert_close(result.cpu(), expected)


def test_integer_scalars_share_one_executable_and_compute_their_own_value():
    """clamp(x, min=i) for 3,000 values of i compiled 12,003 executables; a Scalar's value is an operand."""
    x = torch.arange(-500, 500, dtype=torch.int32)
    d = x.to("neuron")
    d.clamp(min=0)  # may compile
    before = _C.executor_counters()
    for i in range(-400, 400, 7):
        same_as_cpu(d.clamp(min=i), x.clamp(min=i))
        same_as_cpu(d.clamp(max=i), x.clamp(max=i))
        same_as_cpu(torch.add(d, d, alpha=i), torch.add(x, x, alpha=i))
    after = _C.executor_counters()
    assert after[1] - before[1] <= 2 and after[2] - before[2] <= 2, (before, after)


def test_integer_scalars_that_set_a_shape_are_part_of_the_signature():
    for n in (3, 7, 3, 12, 1):
        for _ in range(2):
            assert torch.equal(torch.arange(0, n, device="neuron").cpu(), torch.arange(0, n))
            assert torch.equal(torch.arange(n, device="neuron").cpu(), torch.arange(n))


OPERAND_DTYPES = [torch.bool, torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.bfloat16,
                  torch.float32, torch.float64, torch.complex64]


def _operands():
    """Second operands of every kind type promotion ranks: Python numbers of each category, 0-dim tensors and
    1-dim tensors of every dtype."""
    yield from (True, 3, -2, 2.5, 0.5, 1j)
    for dtype in OPERAND_DTYPES:
        yield torch.ones((), dtype=dtype)
        yield torch.ones(4, dtype=dtype)


def test_calls_with_one_signature_have_one_result_dtype_and_shape(default_dtype):
    """The property the signature keeps: calls it does not tell apart get one output layout, so they must have
    one result dtype and shape. Python numbers reach the op as the binding wraps them."""
    aten = torch.ops.aten
    ops = [aten.add.Tensor, aten.mul.Tensor, aten.div.Tensor, aten.remainder.Tensor, aten.fmod.Tensor,
           aten.floor_divide.default, aten.xlogy.Tensor, aten.maximum.default, aten.atan2.default, aten.eq.Tensor,
           aten.pow.Tensor_Tensor, aten.where.self, aten.clamp.default, aten.clamp.Tensor]
    seen: dict = {}
    for default in (torch.float32, torch.float64):
        torch.set_default_dtype(default)
        for op in ops:
            for dtype in OPERAND_DTYPES:
                for shape in ((4,), ()):
                    first = torch.ones(shape, dtype=dtype)
                    for other in _operands():
                        if op is aten.where.self:
                            args = (first != 0, first, other)
                        elif op is aten.clamp.default:
                            args = (first, other if not isinstance(other, torch.Tensor) else None)
                        else:
                            args = (first, other)
                        try:
                            result = op(*args)
                        except (RuntimeError, TypeError):
                            continue
                        key = _C.signature(op._schema.name, op._schema.overload_name, *args)
                        got = (result.dtype, result.shape)
                        assert seen.setdefault(key, (got, args))[0] == got, (op, args, seen[key])
    assert len(seen) > 1000
