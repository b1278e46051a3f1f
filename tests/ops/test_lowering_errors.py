"""Errors TorchNeuron's lowering raises with another type or wording than PyTorch's
(localneuron/ops/lowering_errors.py): raised at the call, before anything is queued, as an instance of both types, with both wordings, in both modes."""
import re

import pytest
import torch

from fresh_python import run_python
from localneuron.ops import lowering_errors


def neuron(t):
    return t.to("neuron")


# (call, TorchNeuron's type and pattern as its tests match them, PyTorch's CPU type and message)
CASES = {
    "index_select_float_index": (
        lambda dev: torch.index_select(dev(torch.randn(3, 4)), 0, dev(torch.tensor([0.0, 2.0]))),
        TypeError, re.escape("index_select(): Expected dtype int32 or int64 for index"),
        RuntimeError, "index_select(): Expected dtype int32 or int64 for index"),
    "index_select_backward_float_index": (
        lambda dev: torch.ops.aten.index_select_backward(dev(torch.randn(2, 4)), [3, 4], 0,
                                                         dev(torch.tensor([0.0, 2.0]))),
        TypeError, re.escape("index_select_backward(): Expected dtype int32/int64 for index but got: torch.float32"),
        RuntimeError, "index_add_(): Expected dtype int32/int64 for index but got: Float"),
    "mm_reduction_dim": (
        lambda dev: torch.mm(dev(torch.randn(3, 4)), dev(torch.randn(5, 6))),
        RuntimeError, "must have same reduction dim",
        RuntimeError, "mat1 and mat2 shapes cannot be multiplied (3x4 and 5x6)"),
    "mm_3d": (
        lambda dev: torch.mm(dev(torch.randn(2, 3, 4)), dev(torch.randn(4, 5))),
        RuntimeError, "must be 2D", RuntimeError, "self must be a matrix"),
    "mm_1d_mat2": (
        lambda dev: torch.mm(dev(torch.randn(4, 5)), dev(torch.randn(4))),
        RuntimeError, "must be 2D", RuntimeError, "mat2 must be a matrix"),
    "foreach_scalar_list_length": (
        lambda dev: torch._foreach_add([dev(torch.randn(10)) for _ in range(3)], [1.0, 2.0]),
        ValueError, "Tensor list must have same number of elements as scalar list",
        RuntimeError, "Tensor list must have same number of elements as scalar list."),
    "foreach_scalar_list_length_in_place": (
        lambda dev: torch._foreach_mul_([dev(torch.randn(10)) for _ in range(3)], [1.0, 2.0]),
        ValueError, "Tensor list must have same number of elements as scalar list",
        RuntimeError, "Tensor list must have same number of elements as scalar list."),
    "index_copy_slice_shapes": (
        lambda dev: dev(torch.zeros(5, 4)).index_copy(0, dev(torch.tensor([0, 4, 2])), dev(torch.ones(3, 3))),
        ValueError, re.escape("Incompatible shapes for broadcasting: (3, 3) and requested shape (3, 4)"),
        RuntimeError, "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: "
                      "4 at dimension 0 and source slice shape: 3 at dimension 0."),
    "index_copy_slice_shapes_3d": (
        lambda dev: dev(torch.zeros(5, 4, 2)).index_copy_(1, dev(torch.tensor([0, 1, 2])), dev(torch.ones(5, 3, 3))),
        ValueError, re.escape("Incompatible shapes for broadcasting: (5, 3, 3) and requested shape (5, 3, 2)"),
        RuntimeError, "index_copy_(): Source/destination tensor must have same slice shapes. Destination slice shape: "
                      "5 2 at dimension 1 and source slice shape: 5 3 at dimension 0."),
    "index_copy_dimensionality": (
        lambda dev: dev(torch.empty((0,))).index_copy(0, dev(torch.tensor([0, 4, 2])), dev(torch.ones(3, 3))),
        ValueError, re.escape("Incompatible shapes for broadcasting: (3, 3) and requested shape (3,)"),
        IndexError, "index_copy_(): When source and destination are not scalars, their dimensionality must match. "
                    "Source dimensionality (2), destination dimensionality (1)"),
}


def cpu_error(call):
    with pytest.raises(Exception) as raised:
        call(lambda t: t)
    return raised.value


@pytest.mark.parametrize("case", sorted(CASES))
def test_the_error_is_both_types_with_both_wordings_at_the_call(case):
    call, neuron_type, neuron_pattern, cpu_type, cpu_message = CASES[case]
    # PyTorch's own error on the CPU: its type and words are what the message carries
    expected = cpu_error(call)
    assert type(expected) is cpu_type and str(expected).split("\n")[0] == cpu_message
    for _ in range(2):  # a call that raised cached nothing: the next one raises the same way
        with pytest.raises(Exception) as raised:
            call(neuron)  # no synchronize: raised at the call, before anything is queued
        error = raised.value
        assert isinstance(error, neuron_type) and isinstance(error, cpu_type)
        assert re.search(neuron_pattern, str(error))
        assert cpu_message in str(error)
    torch.neuron.synchronize()  # and nothing was held for later


def test_the_classes_derive_from_both_builtins():
    assert issubclass(lowering_errors.TypeAndRuntimeError, TypeError)
    assert issubclass(lowering_errors.TypeAndRuntimeError, RuntimeError)
    assert issubclass(lowering_errors.ValueAndRuntimeError, ValueError)
    assert issubclass(lowering_errors.ValueAndRuntimeError, RuntimeError)
    assert issubclass(lowering_errors.ValueAndIndexError, ValueError)
    assert issubclass(lowering_errors.ValueAndIndexError, IndexError)


def test_calls_that_pytorch_accepts_still_run():
    x = torch.randn(5, 4)
    ts = [torch.randn(10) for _ in range(3)]
    results = [
        torch.index_select(neuron(x), 0, neuron(torch.tensor([0, 2], dtype=torch.int32))).cpu(),
        torch.mm(neuron(x), neuron(x.t())).cpu(),
        neuron(x).index_copy(0, neuron(torch.tensor([0, 4, 2])), neuron(torch.ones(3, 4))).cpu(),
        torch.stack([t.cpu() for t in torch._foreach_add([neuron(t) for t in ts], [1.0, 2.0, 3.0])]),
    ]
    expected = [
        torch.index_select(x, 0, torch.tensor([0, 2], dtype=torch.int32)), torch.mm(x, x.t()),
        x.index_copy(0, torch.tensor([0, 4, 2]), torch.ones(3, 4)), torch.stack(torch._foreach_add(ts, [1.0, 2.0, 3.0])),
    ]
    for r, e in zip(results, expected):
        torch.testing.assert_close(r, e)


def test_errors_pytorch_raises_alone_are_left_as_they_are():
    # TorchNeuron's test expects PyTorch's own IndexError here
    with pytest.raises(IndexError, match="Index is supposed to be a vector") as raised:
        torch.index_select(neuron(torch.randn(3, 4)), 0, neuron(torch.ones(2, 2, dtype=torch.int32)))
    assert type(raised.value) is IndexError


def test_blocking_mode_raises_the_same_at_the_call():
    code = ("import torch, localneuron\n"
            "from localneuron.ops import lowering_errors\n"
            "d = lambda t: t.to('neuron')\n"
            "try:\n"
            "    d(torch.zeros(5, 4)).index_copy(0, d(torch.tensor([0, 4, 2])), d(torch.ones(3, 3)))\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, isinstance(e, ValueError), isinstance(e, RuntimeError))\n"
            "try:\n"
            "    torch.index_select(d(torch.randn(3, 4)), 0, d(torch.tensor([0.0, 2.0])))\n"
            "except Exception as e:\n"
            "    print(type(e).__name__, isinstance(e, TypeError), isinstance(e, RuntimeError))\n")
    result = run_python(code, env={"NEURON_LAUNCH_BLOCKING": "1"}, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-3:-1] == ["ValueAndRuntimeError True True", "TypeAndRuntimeError True True"]
