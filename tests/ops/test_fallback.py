"""CPU fallback: same results, copied in and out, warned once, tracked; and the switches that make it an error."""
import warnings

import pytest
import torch

from fresh_python import run_python
from localneuron.ops import op_records
from localneuron.runtime.environment import read


def test_fallback_op_matches_cpu_and_is_tracked_and_warned_once(tracking):
    a = torch.randn(5, 5)
    n = a.to("neuron")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        q1, r1 = torch.linalg.qr(n)
        q2, _ = torch.linalg.qr(n)
    assert q1.device.type == "neuron" and r1.device.type == "neuron"
    q_ref, r_ref = torch.linalg.qr(a)
    torch.testing.assert_close(q1.cpu(), q_ref)
    torch.testing.assert_close(r1.cpu(), r_ref)
    messages = [str(w.message) for w in caught if "linalg_qr" in str(w.message)]
    assert messages == ["[Neuron] [WARNING] Operator 'aten::linalg_qr' executed via CPU fallback (inputs copied to "
                        "the host and results back); this is slow on Trainium. torch_neuronx.get_fallback_ops() "
                        "lists every op that fell back."]
    assert "aten::linalg_qr" in tracking.get_fallback_ops()
    assert "aten::linalg_qr" not in tracking.get_executed_ops()


def test_native_ops_are_tracked_and_clear_resets(tracking):
    x = torch.randn(4).to("neuron")
    (x * 2).relu()
    executed = tracking.get_executed_ops()
    assert "aten::mul.Tensor" in executed and "aten::relu" in executed  # x * 2: the Tensor overload
    assert tracking.get_fallback_ops() == []
    tracking.clear_op_tracking()
    assert tracking.get_executed_ops() == [] and tracking.get_fallback_ops() == []


def test_in_place_fallback_writes_back_into_views(quiet):
    base = torch.zeros(4, 6)
    n = base.to("neuron")
    gen = torch.Generator().manual_seed(0)
    ref_view = base[1:3, ::2]
    dev_view = n[1:3, ::2]
    # exponential_ is an RNG op: a CPU fallback on Neuron; fill through a strided view
    torch.manual_seed(3)
    dev_view.exponential_()
    assert dev_view.storage_offset() == ref_view.storage_offset() and dev_view.stride() == ref_view.stride()
    filled = n.cpu()
    assert (filled[1:3, ::2] > 0).all() and filled[0].eq(0).all() and filled[1:3, 1::2].eq(0).all()
    del gen


def test_fallback_writes_out_arguments_back_resized_and_returns_them(quiet):
    x = torch.randn(5, 3)
    want = torch.linalg.qr(x)

    def check(result, q, r):
        assert result[0] is q and result[1] is r and q.shape == (5, 3) and r.shape == (3, 3)
        torch.testing.assert_close(q.cpu(), want.Q)
        torch.testing.assert_close(r.cpu(), want.R)

    q, r = torch.empty(0, device="neuron"), torch.empty(0, device="neuron")
    check(torch.linalg.qr(x.neuron(), out=(q, r)), q, r)
    with torch.inference_mode():  # no autograd kernel in between: Python gets the results the fallback returns
        q, r = torch.empty(0, device="neuron"), torch.empty(0, device="neuron")
        check(torch.ops.aten.linalg_qr.out(x.neuron(), Q=q, R=r), q, r)


def test_fallback_of_tensor_list_arguments(tracking, quiet, monkeypatch):
    # the rules apply to signatures compiled from now on: these shapes are this test's own
    for name in ("aten::cat", "aten::_index_put_impl_"):
        monkeypatch.setitem(op_records.OP_SUPPORT, name, op_records.CPU_FALLBACK)
    a, b = torch.randn(2, 11), torch.randn(3, 11)
    out = torch.empty(0, device="neuron")
    assert torch.cat([a.neuron(), b.neuron()], out=out) is out  # Tensor[], and out= resized
    assert torch.equal(out.cpu(), torch.cat([a, b]))
    # x[:, i] = v is _index_put_impl_(x, [None, i], v): Tensor?[] holding None, written into a strided view
    base, index, values = torch.zeros(3, 22), torch.tensor([0, 7]), torch.randn(3, 2)
    base[:, ::2][:, index] = values
    on_device = torch.zeros(3, 22, device="neuron")
    on_device[:, ::2][:, index.neuron()] = values.neuron()
    assert torch.equal(on_device.cpu(), base)
    assert tracking.get_fallback_ops() == ["aten::_index_put_impl_", "aten::cat.out"]  # cat(..., out=) is cat.out


def test_fallback_error_switch_turns_every_fallback_into_an_error():
    code = ("import torch\n"
            "x = torch.eye(3, device='neuron') * 2\n"
            "try:\n    torch.linalg.qr(x)\n"
            "except RuntimeError as e:\n    print('ERR', e)\n"
            "print('usable', (x + 1).sum().item())\n")
    r = run_python(code, env={"LOCALNEURON_FALLBACK_ERROR": "1"})
    assert r.returncode == 0, r.stderr
    assert "ERR aten::linalg_qr has no Neuron implementation and would run as a CPU fallback" in r.stdout
    assert "usable 15.0" in r.stdout


def test_failing_native_op_raises_documented_error_with_fallback_only_for_unimplemented():
    code = ("import torch\n"
            "x, i = torch.ones(3, 2, device='neuron'), torch.tensor([5], device='neuron')\n"
            "try:\n    x.index_select(0, i)\n"
            "except (RuntimeError, IndexError) as e:\n    print(type(e).__name__, str(e).splitlines()[0])\n")
    r = run_python(code, env={"TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS": "1"})
    assert r.stdout.startswith("RuntimeError CPU fallback disabled because TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED"
                               "_OPS=1. Operation aten::index_select failed to execute on Neuron"), r.stdout + r.stderr
    assert "Details: index out of range in self" in r.stdout
    r = run_python(code)  # default: the host retries, and the user's own error comes back unchanged
    assert r.stdout.strip() == "IndexError index out of range in self", r.stdout + r.stderr


# Writes as expressions of m (a 10x10 tensor of ones) and t (arange(100) as 10x10), on either device.
STRIDED_WRITES = {  # a native op writing a tensor that is not contiguous: refused with the CPU fallback disabled
    "aten::add_.Tensor": "m[:, 3].add_(2)",                                  # TorchNeuron's own test: a column
    "aten::mul_.Tensor": "m.t().mul_(t)",                                    # a transposed whole tensor
    "aten::fill_.Scalar": "m[:, 1].fill_(7)",
    "aten::add.out": "torch.add(t, 1, out=m.t())",
}
CONTIGUOUS_WRITES = {  # still native: a contiguous destination, or a copy (TorchNeuron's copy kernel takes views)
    "a row": "m[3].add_(2)",
    "copy_ into a column": "m[:, 1].copy_(t[0])",
    "setitem of a column": "m.__setitem__((slice(None), 2), t[1])",
}


@pytest.mark.parametrize("blocking", ["0", "1"])
def test_a_write_into_a_strided_tensor_is_refused_when_the_cpu_fallback_is_disabled(blocking):
    """TorchNeuron's kernel launch refuses a non-contiguous tensor, and its prologues make only inputs contiguous: an
    in-place or out= write into a strided view fails on Neuron. With the CPU fallback disabled that is the error (read
    at each call, as TorchNeuron reads it), and nothing is written; by default the write runs, as on the CPU."""
    code = f"""
import os, torch
STRIDED, CONTIGUOUS = {STRIDED_WRITES!r}, {CONTIGUOUS_WRITES!r}
def write(expression, device):
    m, t = torch.ones(10, 10, device=device), torch.arange(100.0, device=device).reshape(10, 10)
    eval(expression)
    return m.cpu()
for name, expression in {{**STRIDED, **CONTIGUOUS}}.items():  # by default: the CPU's result, every signature compiled
    assert torch.equal(write(expression, "neuron"), write(expression, "cpu")), name
variable = "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS"
os.environ[variable] = "1"
for name, expression in STRIDED.items():
    m = torch.ones(10, 10, device="neuron")
    try:
        eval(expression, {{"torch": torch, "m": m, "t": torch.arange(100.0, device="neuron").reshape(10, 10)}})
        print("RAN", name)
    except RuntimeError as e:
        documented = (str(e).startswith(f"CPU fallback disabled because {{variable}}=1. Operation {{name}} failed to "
                                        "execute on Neuron") and "Cannot process non-contiguous tensors" in str(e))
        print("REFUSED", name) if documented else print("OTHER", name, str(e)[:300])
    assert torch.equal(m.cpu(), torch.ones(10, 10)), name   # nothing written
for name, expression in CONTIGUOUS.items():
    assert torch.equal(write(expression, "neuron"), write(expression, "cpu")), name
    print("RAN", name)
del os.environ[variable]
print("RAN after", write(STRIDED["aten::add_.Tensor"], "neuron")[0, 3].item())
"""
    r = run_python(code, env={"NEURON_LAUNCH_BLOCKING": blocking})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [f"REFUSED {name}" for name in STRIDED_WRITES] + [
        f"RAN {name}" for name in CONTIGUOUS_WRITES] + ["RAN after 3.0"], r.stdout


def test_support_table_rules_apply_per_dtype(tracking, quiet, monkeypatch):
    from localneuron.ops import op_records

    # a dtype exception: the op is native, except for bfloat16 inputs, which go to the host
    monkeypatch.setitem(op_records.OP_SUPPORT, "aten::atan", op_records.NATIVE)
    monkeypatch.setitem(op_records.DTYPE_EXCEPTIONS, "aten::atan", ("bfloat16",))
    x = torch.linspace(-2, 2, 7)
    torch.testing.assert_close(x.neuron().atan().cpu(), x.atan())
    assert "aten::atan" in tracking.get_executed_ops() and tracking.get_fallback_ops() == []
    torch.testing.assert_close(x.bfloat16().neuron().atan().cpu(), x.bfloat16().atan())
    assert tracking.get_fallback_ops() == ["aten::atan"]


def test_unlisted_ops_run_natively_and_are_reported_as_unconfirmed(tracking, quiet, monkeypatch):
    from localneuron.ops import op_records

    monkeypatch.delitem(op_records.OP_SUPPORT, "aten::sinh", raising=False)
    torch.linspace(0, 1, 5).neuron().sinh()
    assert "aten::sinh" in tracking.get_executed_ops()
    from localneuron.ops.tracking import unlisted_native_ops

    assert "aten::sinh" in unlisted_native_ops()


_IMAGE, _GRAD_UP, _GRAD_DOWN = torch.randn(2, 3, 5, 7), torch.randn(2, 3, 6, 10), torch.randn(2, 3, 3, 4)
QUEUED_FALLBACK_CALLS = {  # op -> (a call of it, its tensor arguments)
    "aten::select_backward": (lambda g: torch.ops.aten.select_backward(g, [3, 4, 5], 0, 1), (torch.randn(4, 5),)),
    "aten::upsample_bilinear2d": (lambda x: torch.ops.aten.upsample_bilinear2d(x, [6, 10], False), (_IMAGE,)),
    "aten::upsample_bilinear2d_backward": (
        lambda g: torch.ops.aten.upsample_bilinear2d_backward(g, [6, 10], [2, 3, 5, 7], False), (_GRAD_UP,)),
    "aten::upsample_bicubic2d": (lambda x: torch.ops.aten.upsample_bicubic2d(x, [6, 10], True), (_IMAGE,)),
    "aten::upsample_bicubic2d_backward": (
        lambda g: torch.ops.aten.upsample_bicubic2d_backward(g, [6, 10], [2, 3, 5, 7], True), (_GRAD_UP,)),
    "aten::_upsample_bilinear2d_aa": (lambda x: torch.ops.aten._upsample_bilinear2d_aa(x, [3, 4], False), (_IMAGE,)),
    "aten::_upsample_bilinear2d_aa_backward": (
        lambda g: torch.ops.aten._upsample_bilinear2d_aa_backward(g, [3, 4], [2, 3, 5, 7], False), (_GRAD_DOWN,)),
    "aten::_upsample_bicubic2d_aa": (lambda x: torch.ops.aten._upsample_bicubic2d_aa(x, [3, 4], False), (_IMAGE,)),
    "aten::_upsample_bicubic2d_aa_backward": (
        lambda g: torch.ops.aten._upsample_bicubic2d_aa_backward(g, [3, 4], [2, 3, 5, 7], False), (_GRAD_DOWN,)),
}


def test_every_queued_fallback_is_a_fallback_and_is_tested():
    from localneuron.ops.queueing import QUEUED_FALLBACKS

    assert set(QUEUED_FALLBACKS) == set(QUEUED_FALLBACK_CALLS)
    assert all(op_records.OP_SUPPORT.get(op) == op_records.CPU_FALLBACK for op in QUEUED_FALLBACKS)


@pytest.mark.parametrize("op", sorted(QUEUED_FALLBACK_CALLS))
def test_queued_fallback_waits_for_no_queue_matches_cpu_and_counts_every_call(op, tracking, quiet):
    """A fallback in ops/queueing.py QUEUED_FALLBACKS runs on the queue behind earlier work (in blocking mode, when
    issued) and is still a CPU fallback to the user: listed, counted per call."""
    call, host_arguments = QUEUED_FALLBACK_CALLS[op]
    device_arguments = [t.to("neuron") for t in host_arguments]
    expected = call(*host_arguments)
    first = call(*device_arguments)  # the first call of a signature runs when issued and learns its outputs
    torch.neuron._sleep(300_000_000)
    queued = call(*device_arguments)
    if not read("NEURON_LAUNCH_BLOCKING"):
        assert not torch.neuron.current_stream().query()
    for result in (first, queued):
        assert result.device.type == "neuron" and result.dtype == expected.dtype
        assert torch.equal(result.cpu(), expected)
    assert op in tracking.get_fallback_ops()
    from localneuron.ops.tracking import FALLBACK, op_counts

    assert op_counts()[FALLBACK][op] == 2


def test_queued_fallback_is_warned_and_attributed_at_its_first_call(tmp_path):
    script = tmp_path / "user_code.py"
    script.write_text("import warnings, torch, torch_neuronx\n"
            "from localneuron.runtime import call_sites\n"
            "x = torch.randn(3, 4, 5, device='neuron', requires_grad=True)\n"
            "with warnings.catch_warnings(record=True) as caught:\n"
            "    warnings.simplefilter('always')\n"
            "    for _ in range(3):\n"
            "        torch.ops.aten.select_backward(x[0], [3, 4, 5], 0, 1)\n"
            "print(sum('select_backward' in str(w.message) for w in caught))\n"
            "print(call_sites.snapshot()['cpu_fallback']['aten::select_backward'])\n")
    r = run_python(f"import runpy; runpy.run_path({str(script)!r})")
    assert r.returncode == 0, r.stderr
    warned, sites = r.stdout.splitlines()
    assert warned == "1"
    assert sites == f"{{'{script}:7 in <module>': 1}}"
