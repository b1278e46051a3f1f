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
        _C.install_executor(**registration.executor_callbacks())


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
