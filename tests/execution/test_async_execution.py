"""Asynchronous execution (docs/asynchronous-execution.md): ops are queued per device and stream and Python runs ahead;
host reads, synchronize() and events are the synchronisation points; memory is stream-ordered; errors in
queued work surface at the next synchronisation point with the op, its signature and the user's line;
NEURON_LAUNCH_BLOCKING=1 runs every op when it is issued.

torch.neuron._sleep(cycles) queues a busy period on the current stream (as torch.cuda._sleep does on a
GPU), so these tests can hold a queue without timing anything."""
import inspect
import os
import sysconfig

import pytest
import torch

from localneuron import _C
from localneuron.runtime.environment import read
from fresh_python import run_python

pytestmark = pytest.mark.skipif(read("NEURON_LAUNCH_BLOCKING"),
                                reason="tests the asynchronous mode: run with NEURON_LAUNCH_BLOCKING=0 (its blocking "
                                       "mode is tested in a subprocess)")

BUSY = 300_000_000  # cycles: ~0.2 s of simulated NeuronCore time at 1.4 GHz


def steps(t, n):
    for i in range(n):
        t.mul_(1.01).add_(i * 0.001)
    return (t @ t.t()).relu()


def test_queued_ops_keep_their_order_and_host_reads_wait_for_them():
    x = torch.randn(64, 64)
    d = x.to("neuron")
    steps(d.clone(), 1).cpu()  # the first call of each signature runs synchronously (it learns its outputs)
    torch.neuron._sleep(BUSY)
    e = steps(d, 50)
    assert not torch.neuron.current_stream().query()  # Python ran ahead of the device
    torch.testing.assert_close(e.cpu(), steps(x, 50))


@pytest.mark.parametrize("read", [
    lambda t: t.cpu()[0].item(),
    lambda t: t[0].item(),
    lambda t: t.tolist()[0],
    lambda t: float(str(t[0]).split("(")[1].split(",")[0]),
    lambda t: t.cpu().numpy()[0].item(),
    lambda t: 3.0 if bool(t[0] == 3.0) else -1.0,
])
def test_every_host_read_synchronises(read):
    d = torch.ones(4, device="neuron")
    torch.neuron._sleep(BUSY)
    d.add_(2)
    assert read(d) == pytest.approx(3.0)


def test_synchronize_waits_for_the_queue():
    torch.neuron._sleep(BUSY)
    assert not torch.neuron.current_stream().query()
    torch.neuron.synchronize()
    assert torch.neuron.current_stream().query()
    torch.accelerator.synchronize()


def test_events_and_streams_order_work_across_streams(host_cc):
    side = torch.neuron.Stream()
    x = torch.ones(8, device="neuron")
    torch.neuron.synchronize()
    ((x * 5) + 1).cpu()  # learn the outputs of both signatures
    start, end = torch.neuron.Event(enable_timing=True), torch.neuron.Event(enable_timing=True)
    with torch.neuron.stream(side):
        start.record()
        torch.neuron._sleep(BUSY)
        y = x * 5
        end.record()
    assert not end.query() and not side.query()
    torch.neuron.current_stream().wait_event(end)  # the default stream now waits for the side stream
    z = y + 1
    assert z.cpu().tolist() == [6.0] * 8
    end.synchronize()
    assert end.query() and side.query()
    assert start.elapsed_time(end) > 0.0


def test_wait_stream_and_record_stream(host_cc):
    side = torch.neuron.Stream()
    ((torch.full((16,), 2.0, device="neuron") * 3) - 1).cpu()
    with torch.neuron.stream(side):
        torch.neuron._sleep(BUSY)
        a = torch.full((16,), 2.0, device="neuron") * 3
    a.record_stream(torch.neuron.current_stream())
    torch.neuron.current_stream().wait_stream(side)
    b = a - 1
    assert b.cpu().tolist() == [5.0] * 16
    side.synchronize()
    assert side.query()


def test_memory_freed_in_python_is_reused_at_once_on_its_stream():
    torch.full((1 << 16,), 0.0, device="neuron").cpu()  # full's first call (one op, run whole): learns its layout
    torch.ones(1 << 16, device="neuron").cpu()  # and ones' (run whole too): x below is a block of the device's pool
    x = torch.ones(1 << 16, device="neuron")
    (x * 2).cpu()  # the multiply's first call: learns its output layout
    torch.neuron._sleep(BUSY)
    y = x * 2  # queued behind the busy period; it reads x
    x_ptr = x.data_ptr()
    del x
    assert not torch.neuron.current_stream().query()
    # the next allocation on the stream takes x's block: whatever writes it is queued after the multiply
    z = torch.full((1 << 16,), 5.0, device="neuron")
    assert z.data_ptr() == x_ptr
    assert y.cpu().sum().item() == 2 * (1 << 16)
    assert z.cpu().sum().item() == 5 * (1 << 16)


def test_a_block_another_streams_queued_work_reads_waits_for_that_stream(host_cc):
    x = torch.ones(1 << 16, device="neuron")
    (x * 2).cpu()
    side = torch.neuron.Stream()
    with torch.neuron.stream(side):
        torch.neuron._sleep(BUSY)
        y = x * 2  # the side stream's queued work reads x
    x_ptr = x.data_ptr()
    del x
    z = torch.empty(1 << 16, device="neuron")
    assert z.data_ptr() != x_ptr  # the side stream has not passed its multiply
    torch.neuron.current_stream().wait_stream(side)
    assert y.cpu().sum().item() == 2 * (1 << 16)
    w = torch.empty(1 << 16, device="neuron")  # it has now: the block is free for every stream
    assert w.data_ptr() == x_ptr


def test_record_stream_keeps_a_block_until_that_stream_passes_its_work(host_cc):
    x = torch.ones(1 << 16, device="neuron")
    side = torch.neuron.Stream()
    with torch.neuron.stream(side):
        torch.neuron._sleep(BUSY)
    x.record_stream(side)  # as if the side stream's queued work used x
    x_ptr = x.data_ptr()
    del x
    z = torch.empty(1 << 16, device="neuron")
    assert z.data_ptr() != x_ptr
    side.synchronize()
    w = torch.empty(1 << 16, device="neuron")
    assert w.data_ptr() == x_ptr


def test_empty_cache_waits_for_queued_work_on_the_blocks_it_returns():
    x = torch.ones(1 << 16, device="neuron")
    (x * 2).cpu()
    torch.neuron._sleep(BUSY)
    y = x * 2
    del x
    torch.neuron.empty_cache()  # x's block goes back to the host only once the multiply has read it
    assert y.cpu().sum().item() == 2 * (1 << 16)


# Reserved bytes are not compared: ops run when issued adopt their host kernels' results (reserved
# and released with them), where queued ops fill blocks taken from the cache.
MEMORY_STATS = """
import torch, localneuron
def stats():
    torch.neuron.synchronize()
    return torch.neuron.memory_allocated(), torch.neuron.max_memory_allocated()
x = torch.randn(256, 256, device="neuron")
for i in range(50):  # allocate/free loop
    x = (x * 1.001 + 0.5).relu() @ x.t() / 256
print(*stats())
torch.neuron.reset_peak_memory_stats()
model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 64)).to("neuron")
optimizer = torch.optim.AdamW(model.parameters())
data = torch.randn(32, 64, device="neuron")
for step in range(3):  # small training steps
    loss = model(data).pow(2).mean()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    del loss
print(*stats())
"""


def test_memory_statistics_equal_the_blocking_runs():
    runs = {mode: run_python(MEMORY_STATS, env={"NEURON_LAUNCH_BLOCKING": mode}) for mode in ("0", "1")}
    for done in runs.values():
        assert done.returncode == 0, done.stderr
    asynchronous, blocking = (runs[m].stdout.split() for m in ("0", "1"))
    assert len(blocking) == 4 and int(blocking[1]) > 0
    assert asynchronous == blocking


def test_an_error_in_queued_work_names_the_op_signature_and_line_then_the_device_works_on():
    table = torch.randn(10, 4, device="neuron")
    ok = torch.tensor([1, 2, 3], device="neuron")
    bad = torch.tensor([1, 2, 30], device="neuron")
    torch.index_select(table, 0, ok)  # first call of the signature: learns its output layout
    torch.neuron.synchronize()
    line = inspect.currentframe().f_lineno + 1
    out = torch.index_select(table, 0, bad)  # queued: nothing is raised here
    with pytest.raises(RuntimeError) as raised:
        out.cpu()
    message = str(raised.value)
    assert "aten::index_select(Float[10, 4], 0, Long[3])" in message
    assert f"{__file__}:{line}" in message
    assert "NEURON_LAUNCH_BLOCKING=1" in message
    torch.neuron.synchronize()  # reported once
    assert (table * 2).cpu().shape == (10, 4)
    torch.testing.assert_close(torch.index_select(table, 0, ok).cpu(), table.cpu()[[1, 2, 3]])


def test_a_queued_errors_line_is_the_users_not_a_frame_of_an_installed_library():
    # One rule for library code (localneuron/runtime/call_sites.py): an installed package such as transformers, in
    # site-packages, is library code for a queued error's line as for the report's time by source line.
    library_file = os.path.join(sysconfig.get_paths()["purelib"], "modeling_library_under_test", "modeling.py")
    library = {"torch": torch}
    exec(compile("def forward(table, index):\n    return torch.index_select(table, 0, index)\n", library_file, "exec"),
         library)
    table = torch.randn(10, 4, device="neuron")
    library["forward"](table, torch.tensor([1, 2, 3], device="neuron"))
    torch.neuron.synchronize()
    line = inspect.currentframe().f_lineno + 1
    out = library["forward"](table, torch.tensor([1, 2, 30], device="neuron"))
    with pytest.raises(RuntimeError) as raised:
        out.cpu()
    assert f"enqueued at {__file__}:{line}" in str(raised.value)
    assert "modeling_library_under_test" not in str(raised.value)


@pytest.mark.parametrize("spelling", ["1", "On"])
def test_launch_blocking_raises_at_the_op_itself(spelling):
    """A spelling of a true boolean other than 1 turns the mode on too: the mode reads the variable with the one
    boolean parser (runtime/environment.py), whose every spelling tests/project/test_env_config.py checks."""
    code = """
import torch, localneuron
table = torch.randn(10, 4, device="neuron")
torch.index_select(table, 0, torch.tensor([1], device="neuron"))
try:
    torch.index_select(table, 0, torch.tensor([30], device="neuron"))
    print("not raised")
except (IndexError, RuntimeError) as e:
    print("raised at the op")
torch.neuron._sleep(100000000)
print(torch.neuron.current_stream().query())
"""
    done = run_python(code, env={"NEURON_LAUNCH_BLOCKING": spelling})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["raised", "at", "the", "op", "True"]


def test_invalid_launch_blocking_value_is_refused():
    done = run_python("import torch, localneuron; print(torch._C._get_privateuse1_backend_name())",
                      env={"NEURON_LAUNCH_BLOCKING": "maybe"})
    assert "NEURON_LAUNCH_BLOCKING='maybe' is not valid: expected 1 or 0 (also true/false, yes/no, on/off)" in done.stderr
    assert done.stdout.split() == ["privateuseone"]  # the device is not registered


def test_interpreter_exit_finishes_queued_work_and_reports_its_errors():
    code = """
import torch, localneuron
table = torch.randn(10, 4, device="neuron")
torch.index_select(table, 0, torch.tensor([1], device="neuron"))
x = torch.ones(1000, device="neuron")
(x * 1.0001).cpu()
torch.neuron._sleep(300000000)
out = torch.index_select(table, 0, torch.tensor([30], device="neuron"))
for _ in range(200):
    x = x * 1.0001
"""
    done = run_python(code)
    assert done.returncode == 1, done.stderr  # as the same program in blocking mode ends (the failure is uncaught)
    assert "at exit" in done.stderr and "aten::index_select" in done.stderr


def test_queued_ops_learn_their_outputs_on_the_first_call():
    _C.executor_counters()
    a = torch.randn(5, 7, device="neuron")
    first = torch.special.erf(a)
    torch.neuron._sleep(BUSY)
    second = torch.special.erf(a)
    assert not torch.neuron.current_stream().query()
    assert second.shape == first.shape and second.stride() == first.stride()
    torch.testing.assert_close(second.cpu(), first.cpu())


def _update(t):
    t.add_(1).mul_(0.5)
    doubled = torch.relu(t) * 2  # new outputs the worker fills with a copy into them
    t.clamp_(max=0.7)
    return t, doubled


def test_queued_work_runs_under_the_issuing_threads_inference_mode():
    x = torch.randn(8, 8)
    with torch.inference_mode():
        d = x.to("neuron")
        _update(d.clone())  # first calls learn their outputs
        torch.neuron._sleep(BUSY)
        got = _update(d)
        assert not torch.neuron.current_stream().query()  # really queued
        for g, e in zip(got, _update(x.clone())):
            torch.testing.assert_close(g.cpu(), e)
        assert d.is_inference()
    normal = x.to("neuron")  # the worker's next work, issued outside inference mode, is normal work
    torch.neuron._sleep(BUSY)
    got = _update(normal)
    assert not got[1].is_inference()
    for g, e in zip(got, _update(x.clone())):
        torch.testing.assert_close(g.cpu(), e)


def test_queued_parameter_updates_under_no_grad_keep_autograd_state():
    w_cpu = torch.randn(16, requires_grad=True)
    w = w_cpu.detach().to("neuron").requires_grad_()
    (w * 3).sum().backward()
    with torch.no_grad():
        w.mul_(0.9).add_(w.grad, alpha=-0.1)  # first calls learn their outputs
        torch.neuron._sleep(BUSY)
        for _ in range(2):
            w.mul_(0.9).add_(w.grad, alpha=-0.1)
        assert not torch.neuron.current_stream().query()
    expected = w_cpu.detach()
    for _ in range(3):
        expected = expected * 0.9 - 0.1 * 3
    assert w.requires_grad and w.is_leaf and w.grad_fn is None
    torch.testing.assert_close(w.detach().cpu(), expected)


def test_ops_under_a_python_dispatch_mode_run_on_the_issuing_thread():
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = []

    class Outer(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            seen.append(func)
            return func(*args, **(kwargs or {}))

    class Inner(TorchDispatchMode):  # under two modes the Python key stays set inside the outer one
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            return func(*args, **(kwargs or {}))

    x = torch.randn(6)
    d = x.to("neuron")
    torch.exp(d).cpu()  # learned: the same op would be queued outside the modes
    with Outer(), Inner():
        torch.neuron._sleep(BUSY)
        got = torch.exp(d)
    torch.testing.assert_close(got.cpu(), torch.exp(x))
    assert torch.ops.aten.exp.default in seen


@pytest.mark.parametrize("limit", [-1, 0], ids=["short work in place", "all work to the worker"])
def test_short_work_on_an_idle_stream_keeps_queued_semantics(limit):
    table = torch.randn(10, 4, device="neuron")
    torch.index_select(table, 0, torch.tensor([1], device="neuron")).cpu()  # learned: later calls are queued
    (table * 3).cpu()
    _C.set_run_in_place_limits(limit, limit)
    try:
        torch.neuron.synchronize()
        line = inspect.currentframe().f_lineno + 1
        out = torch.index_select(table, 0, torch.tensor([40], device="neuron"))  # the stream is idle
        after = table * 3  # issued after the failing op, runs as it would have
        with pytest.raises(RuntimeError, match=f"aten::index_select.*{__file__}:{line}"):
            out.cpu()
        torch.testing.assert_close(after.cpu(), table.cpu() * 3)
    finally:
        _C.set_run_in_place_limits()


IN_PLACE_VIEWS = {  # op -> it on a tensor (each changes the tensor's sizes, strides or storage in place)
    "squeeze_": lambda t: t[:1].squeeze_(0),
    "unsqueeze_": lambda t: t.unsqueeze_(1),
    "t_": lambda t: t.t_(),
    "transpose_": lambda t: t.transpose_(0, 1),
    "swapdims_": lambda t: t.swapdims_(0, 1),
    "as_strided_": lambda t: t.as_strided_((3, 2), (1, 3)),
    "resize_": lambda t: t.resize_(6),
    "set_": lambda t: t.set_(t.storage(), 0, (3,), (2,)),
}


@pytest.mark.parametrize("op", IN_PLACE_VIEWS)
def test_an_in_place_view_changes_the_tensor_when_issued_behind_queued_work(op):
    x = torch.randn(2, 3)
    expected = IN_PLACE_VIEWS[op](x * 2)
    reallocates = op in ("resize_", "set_")
    for call in range(3):  # the first calls learn the ops' outputs; later ones are queued
        d = x.to("neuron")
        torch.neuron._sleep(BUSY)
        t = d * 2
        result = IN_PLACE_VIEWS[op](t)
        assert (result.shape, result.stride()) == (expected.shape, expected.stride())
        if call > 0:  # re-describing bytes runs at once; what may reallocate waits for the queue
            assert torch.neuron.current_stream().query() == reallocates
        torch.testing.assert_close(result.cpu(), expected)


def test_arange_with_int_bounds_is_queued_and_with_float_bounds_waits_for_the_queue():
    torch.arange(3, 8, device="neuron").cpu()  # the first call of a signature learns its outputs
    torch.neuron._sleep(BUSY)
    ints = torch.arange(3, 8, device="neuron")
    assert not torch.neuron.current_stream().query()  # int bounds are in the signature: the shape is fixed
    for end in (2.5, 4.0):  # float bounds share one executable: each call's length is its own
        torch.neuron._sleep(BUSY)
        floats = torch.arange(0.0, end, 0.5, device="neuron")
        assert torch.neuron.current_stream().query()
        assert torch.equal(floats.cpu(), torch.arange(0.0, end, 0.5))
    assert torch.equal(ints.cpu(), torch.arange(3, 8))


def test_an_op_drawing_from_the_default_generator_draws_when_issued():
    x = torch.ones(64, 64, device="neuron")
    for _ in range(3):  # the first call of a signature learns its outputs; later ones would be queued
        torch.neuron._sleep(BUSY)
        torch.manual_seed(1)
        first = torch.nn.functional.dropout(x, 0.5)  # native_dropout: no generator argument
        torch.manual_seed(1)
        second = torch.nn.functional.dropout(x, 0.5)
        assert torch.equal(first.cpu(), second.cpu())


def test_fused_attention_is_queued_although_tagged_as_drawing_random_numbers():
    """The device's fused attention takes no dropout (its host kernel refuses it), so it draws nothing and
    need not wait for the queue as ops that draw from the default generator do."""
    q, k, v = (torch.randn(2, 4, 16, 8) for _ in range(3))
    dq, dk, dv = (t.to("neuron") for t in (q, k, v))
    attention = torch.nn.functional.scaled_dot_product_attention
    attention(dq, dk, dv).cpu()  # learned: later calls are queued
    torch.neuron._sleep(BUSY)
    queued = attention(dq, dk, dv, is_causal=False)
    assert not torch.neuron.current_stream().query()
    torch.testing.assert_close(queued.cpu(), attention(q, k, v))


def test_queued_work_writes_its_outputs_in_place_or_falls_back_to_the_functional_kernel(capfd):
    """Queued work runs the op's out= overload into the outputs handed to Python at issue; huber_loss's out=
    computes into a resized result (its outputs cannot be resized), so it falls back to the functional
    kernel, with the same values and without the resize warning of the abandoned attempt."""
    x, y = torch.randn(2, 5), torch.randn(2, 5)
    dx, dy = x.to("neuron"), y.to("neuron")
    for op in (lambda a, b: torch.mm(a, b.t()), torch.atan2, torch.nn.functional.huber_loss):
        op(dx, dy).cpu()  # learned: later calls are queued
        torch.neuron._sleep(BUSY)
        queued = [op(dx, dy) for _ in range(3)]
        assert not torch.neuron.current_stream().query()
        for result in queued:
            assert torch.equal(result.cpu(), op(x, y))
    assert "resized" not in capfd.readouterr().err
