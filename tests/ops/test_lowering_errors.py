"""Errors TorchNeuron's lowering raises with another type or wording than PyTorch's
(localneuron/ops/lowering_errors.py): raised at the call, before anything is queued, as an instance of both types, with both wordings, in both modes;
and aten::index's index out of bounds, a value check of its kernel, as IndexError and RuntimeError at the call in
blocking mode and, held, at the synchronisation point in the asynchronous mode."""
import re

import pytest
import torch

from fresh_python import run_python
from localneuron.ops import lowering_errors, policy


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


# An index out of bounds in advanced indexing: a value check of the device kernel, which TorchNeuron reports as
# RuntimeError and PyTorch as IndexError with the same words (TorchNeuron's test_index.py matches
# "index .* is out of bounds for dimension 0 with size 4"). Raised as both, at the call in blocking mode, at the
# synchronisation point in the asynchronous mode (held with the line that issued it), in a fresh process per mode so
# that the first call of the signature and a later one, queued once a valid call has taught the signature's outputs,
# are both seen.
OUT_OF_BOUNDS_SCRIPT = """
import torch, localneuron
from localneuron.ops.lowering_errors import IndexAndRuntimeError

def report(where, e):
    print(where, type(e).__name__, isinstance(e, IndexError), isinstance(e, RuntimeError), repr(str(e)))

x = torch.arange(16.0).reshape(4, 4).to("neuron")
for attempt, last in (("first", 15), ("valid", 2), ("cached", 15)):
    row_idx = torch.tensor([1, last], device="neuron")
    try:
        y = x[row_idx, :]  # ISSUING LINE
    except Exception as e:
        report(attempt + " at-call", e)
        continue
    print(attempt, "queued", y.cpu()[:, 0].tolist() if attempt == "valid" else "")
    try:
        torch.neuron.synchronize()
    except Exception as e:
        report(attempt + " at-sync", e)
    torch.neuron.synchronize()  # raised once: nothing more
print("later", (x + 1)[0].cpu().tolist(), x[torch.tensor([3, 0], device="neuron"), :].cpu()[:, 0].tolist())
try:
    x[torch.tensor([1, 15], device="neuron")] = 1.0  # index_put_: PyTorch's IndexError alone (the rule is aten::index's)
    torch.neuron.synchronize()
except Exception as e:
    report("index_put", e)
"""
ISSUING_LINE = next(n for n, line in enumerate(OUT_OF_BOUNDS_SCRIPT.split("\n"), 1) if "ISSUING LINE" in line)
WORDS = "index 15 is out of bounds for dimension 0 with size 4"


def run_out_of_bounds(blocking: bool) -> list:
    result = run_python(OUT_OF_BOUNDS_SCRIPT, env={"NEURON_LAUNCH_BLOCKING": "1" if blocking else "0"}, timeout=300)
    assert result.returncode == 0, result.stderr
    return [line.strip().split(" ", 5) for line in result.stdout.strip().split("\n")]


def test_an_index_out_of_bounds_is_both_types_at_the_call_in_blocking_mode():
    lines = run_out_of_bounds(blocking=True)
    for attempt, line in zip(("first", "cached"), (lines[0], lines[2])):
        assert line[:5] == [attempt, "at-call", "IndexAndRuntimeError", "True", "True"]
        assert eval(line[5]) == WORDS  # PyTorch's words, which are TorchNeuron's (its test matches them)
    assert lines[1] == ["valid", "queued", "[4.0,", "8.0]"]
    assert lines[3] == ["later", "[1.0,", "2.0,", "3.0,", "4.0]", "[12.0, 0.0]"]
    assert lines[4][:4] == ["index_put", "IndexError", "True", "False"]  # PyTorch's IndexError alone


def test_an_index_out_of_bounds_is_held_and_raised_as_both_types_at_synchronize_in_async_mode():
    lines = run_out_of_bounds(blocking=False)
    # a signature's first call runs at the call (its outputs are learnt): raised there, as in blocking mode
    assert lines[0][:5] == ["first", "at-call", "IndexAndRuntimeError", "True", "True"]
    assert eval(lines[0][5]) == WORDS
    assert lines[1] == ["valid", "queued", "[4.0,", "8.0]"]
    # a later call is queued: the call returns, synchronize() raises the held failure, naming the issuing line
    assert lines[2] == ["cached", "queued"]
    assert lines[3][:5] == ["cached", "at-sync", "IndexAndRuntimeError", "True", "True"]
    message = eval(lines[3][5])
    assert re.search(r"index .* is out of bounds for dimension 0 with size 4", message)  # TorchNeuron's test's regex
    assert "queued work aten::index(Float[4, 4], [Long[2]]) failed: " + WORDS in message
    assert re.search(rf"enqueued at <string>:{ISSUING_LINE}\b", message)
    assert lines[4] == ["later", "[1.0,", "2.0,", "3.0,", "4.0]", "[12.0, 0.0]"]  # the device stays usable
    assert lines[5][:4] == ["index_put", "IndexError", "True", "False"]


def test_only_aten_index_out_of_bounds_takes_the_class_that_is_both():
    both = lowering_errors.IndexAndRuntimeError
    assert issubclass(both, IndexError) and issubclass(both, RuntimeError)
    assert policy.held_error_type("aten::index", "IndexError", WORDS) is both
    assert policy.held_error_type("aten::index_put_", "IndexError", WORDS) is None
    assert policy.held_error_type("aten::index", "IndexError", "Dimension out of range (expected ...)") is None
    assert policy.held_error_type("aten::index", "RuntimeError", WORDS) is None
    error = policy.kernel_error("aten::index", IndexError(WORDS))
    assert type(error) is both and str(error) == WORDS
    other = IndexError("index out of range in self")
    assert policy.kernel_error("aten::embedding", other) is other


def test_several_held_failures_take_the_class_of_the_first_as_blocking_mode_would_end_with_it():
    code = ("import torch, localneuron\n"
            "x = torch.arange(16.0).reshape(4, 4).to('neuron')\n"
            "ok, bad = torch.tensor([1, 2], device='neuron'), torch.tensor([1, 15], device='neuron')\n"
            "x[ok, :].cpu(); x[ok] = 1.0; x.cpu()  # both signatures learnt: later calls are queued\n"
            "for order in ('put-first', 'index-first'):\n"
            "    if order == 'put-first':\n"
            "        x[bad] = 1.0; y = x[bad, :]\n"
            "    else:\n"
            "        y = x[bad, :]; x[bad] = 1.0\n"
            "    try:\n"
            "        torch.neuron.synchronize()\n"
            "    except Exception as e:\n"
            "        print(order, type(e).__name__, isinstance(e, IndexError), isinstance(e, RuntimeError),\n"
            "              '2 queued ops failed' in str(e))\n")
    result = run_python(code, env={"NEURON_LAUNCH_BLOCKING": "0"}, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().split("\n") == [
        "put-first RuntimeError False True True",  # index_put_'s IndexError is PyTorch's alone: held as RuntimeError
        "index-first IndexAndRuntimeError True True True"]
