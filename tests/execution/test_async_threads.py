"""Several Python threads issuing device work at once, in both execution modes: threads whose first ops run
together do not deadlock; threads sharing a stream get the CPU's bits, with small and large (> 32 MiB) tensors
freed while queued work still reads them; the queue's ordering rule (csrc/queue/stream_order.h) holds under many
issuing threads, streams, frees and host reads; a failed queued op is raised in every thread that synchronises
until the thread that issued it has seen it, every failed op is reported, and a process that ends with a failure
nobody was told of exits with status 1 (csrc/queue/held_errors.h).

Programs that might hang or crash run in a child process, bounded in time."""
import inspect
import os
import sys
import threading

import pytest
import torch

from localneuron.runtime.environment import read
from fresh_python import run_python
from cli_runner import localneuron, write

BLOCKING = read("NEURON_LAUNCH_BLOCKING")
STRESS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "support", "ordering_stress.py")


def run_script(args, timeout):
    import subprocess
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("attempt", range(3))
def test_threads_whose_first_ops_run_together_do_not_deadlock(attempt):
    # A fresh process each time: the first queued op of a process captures its source line, whose library-code rule
    # imported Python modules inside a C++ one-time initialiser while the other thread waited on it holding the GIL.
    code = """
import threading, torch, localneuron
start = threading.Barrier(4)
def issue(k):
    x = torch.full((64,), float(k), device="neuron")
    (x * 1.5).cpu()  # the first call of the signature runs when issued
    start.wait()
    torch.neuron._sleep(20_000_000)  # the stream is busy: the next ops are queued, each capturing its line
    for _ in range(20):
        x = x * 1.0001
    results[k] = float(x[0].cpu()) > 0
results = {}
threads = [threading.Thread(target=issue, args=(k + 1,)) for k in range(4)]
for t in threads: t.start()
for t in threads: t.join()
print(*[results[k + 1] for k in range(4)])  # one print: threads printing at once interleave their lines
"""
    done = run_python(code, timeout=90)  # hung 3 runs in 3 before the fix; a run takes ~3 s
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True"] * 4


def test_threads_sharing_a_stream_free_what_they_queued_and_get_the_cpu_bits():
    # A thread takes a host-made result (masked_select), queues work on it and drops it at once, while other threads
    # fill the stream's queue with matmuls: the queued work must run before the bytes go back to the host allocator
    # (which writes its free-list pointers into them, or unmaps them above 32 MiB).
    code = """
import threading, torch, localneuron
stop = threading.Event()
def load():
    a = torch.randn(192, 192, device="neuron")
    while not stop.is_set():
        a = (a @ a).tanh()
    a.cpu()
def select(seed, n, rounds, wrong):
    g = torch.Generator().manual_seed(seed)
    for _ in range(rounds):
        x = torch.randn(n, generator=g)
        m = x > 0
        s = torch.masked_select(x.to("neuron"), m.to("neuron"))
        y = (s * 2).sin()
        del s
        want = (torch.masked_select(x, m) * 2).sin()
        if not torch.equal(y.cpu().view(torch.int32), want.view(torch.int32)):
            wrong.append(seed)
loads = [threading.Thread(target=load) for _ in range(2)]
for t in loads: t.start()
wrong_small, wrong_large = [], []
selectors = [threading.Thread(target=select, args=(k, 1000, 100, wrong_small)) for k in range(3)]
selectors.append(threading.Thread(target=select, args=(9, 10 * 1024 * 1024, 4, wrong_large)))  # 40 MiB
for t in selectors: t.start()
for t in selectors: t.join()
stop.set()
for t in loads: t.join()
print(len(wrong_small), len(wrong_large))
"""
    done = run_python(code, timeout=600)
    assert done.returncode == 0, (done.returncode, done.stderr[-3000:])  # was -11 (the worker read unmapped bytes)
    assert done.stdout.split() == ["0", "0"], done.stdout


def test_the_ordering_rule_holds_under_many_threads_streams_frees_and_host_reads():
    # The same program as benchmarks/queue_ordering_stress.py runs at length; here bounded to 8 s of issuing, or 5 s
    # in blocking mode, where every op has run before the next is issued and the queue has nothing to order
    seconds = "5" if BLOCKING else "8"
    done = run_script([STRESS, "--seconds", seconds, "--threads", "6", "--shared-streams", "2", "--large"], timeout=600)
    assert done.returncode == 0, (done.returncode, done.stdout[-3000:], done.stderr[-3000:])
    assert " 0 mismatches, 0 errors" in done.stdout, done.stdout


# ----------------------------------------------------------------------------------------------------
# Errors of queued work

def learned_index_select(columns=4):
    """A table and a failing index: the signature's first call runs when issued (it learns the output layout),
    so that the failing call is queued."""
    table = torch.randn(10, columns, device="neuron")
    torch.index_select(table, 0, torch.tensor([1, 2, 3], device="neuron"))
    torch.neuron.synchronize()
    return table, torch.tensor([1, 2, 30], device="neuron")


def raised_by(call) -> str | None:
    try:
        call()
    except (RuntimeError, IndexError) as error:
        return str(error)
    return None


def test_a_failed_queued_op_is_raised_in_every_thread_that_synchronises_until_its_issuer_has_seen_it():
    table, bad = learned_index_select()
    torch.neuron._sleep(50_000_000)  # the failing op is queued behind a busy period
    seen = {}
    issued, others_done = threading.Event(), threading.Event()
    line = {}

    def issuer():
        line["issue"] = inspect.currentframe().f_lineno + 2
        try:
            out = torch.index_select(table, 0, bad)
            seen["at the op"] = None
        except (RuntimeError, IndexError) as error:
            out, seen["at the op"] = None, str(error)
        issued.set()
        others_done.wait(60)
        seen["issuer reads"] = raised_by(out.cpu) if out is not None else None
        seen["issuer again"] = raised_by(torch.neuron.synchronize)

    def other(name):
        issued.wait(60)
        seen[name] = raised_by(torch.neuron.synchronize)
        seen[name + " again"] = raised_by(torch.neuron.synchronize)

    first = threading.Thread(target=issuer)
    first.start()
    for name in ("B", "C"):
        t = threading.Thread(target=other, args=(name,))
        t.start()
        t.join()
    others_done.set()
    first.join()
    late = {}
    t = threading.Thread(target=lambda: late.setdefault("D", raised_by(torch.neuron.synchronize)))
    t.start()
    t.join()
    if BLOCKING:  # raised at the op itself, in the thread that issued it; nothing is held for anyone else
        assert seen["at the op"] is not None and "out of range" in seen["at the op"]
        assert [seen[k] for k in ("B", "B again", "C", "C again", "issuer reads", "issuer again")] == [None] * 6
        assert late["D"] is None
        return
    assert seen["at the op"] is None
    for name in ("B", "C", "issuer reads"):
        message = seen[name]
        assert message is not None, f"{name} was not told that a queued op failed"
        assert "aten::index_select(Float[10, 4], 0, Long[3])" in message and f"{__file__}:{line['issue']}" in message
    assert "in another thread" in seen["B"] and "in another thread" not in seen["issuer reads"]
    # Raised once per thread, and forgotten once its issuer has seen it.
    assert (seen["B again"], seen["C again"], seen["issuer again"], late["D"]) == (None, None, None, None)
    assert (table * 2).cpu().shape == (10, 4)  # the device works on


def test_every_failed_queued_op_is_reported_not_just_the_first():
    table, bad = learned_index_select()
    src = torch.zeros(5, device="neuron")
    torch.gather(src, 0, torch.tensor([0, 1], device="neuron"))
    bad_gather = torch.tensor([0, 9], device="neuron")  # made before: a copy from the host synchronises
    torch.neuron.synchronize()
    torch.neuron._sleep(50_000_000)
    first = inspect.currentframe().f_lineno + 1
    at_ops = [raised_by(lambda: torch.index_select(table, 0, bad)),
              raised_by(lambda: torch.gather(src, 0, bad_gather))]
    message = raised_by(torch.neuron.synchronize)
    if BLOCKING:  # each raised at its op
        assert None not in at_ops and message is None
        return
    assert at_ops == [None, None] and message is not None
    assert "2 queued ops failed" in message, message
    assert message.index("aten::index_select") < message.index("aten::gather")  # in the order they ran
    assert f"{__file__}:{first}" in message and f"{__file__}:{first + 1}" in message
    assert raised_by(torch.neuron.synchronize) is None


@pytest.mark.skipif(BLOCKING, reason="a failing op raises at the op in blocking mode; nothing is queued")
def test_failures_of_two_threads_are_both_raised_in_the_first_to_synchronise():
    table, bad = learned_index_select()
    other_table, _ = learned_index_select(columns=6)
    torch.neuron._sleep(50_000_000)
    issued = threading.Barrier(2)
    b_done = threading.Event()
    messages = {}

    def issue(name, table):
        torch.index_select(table, 0, bad)
        issued.wait(60)
        if name == "A":
            b_done.wait(60)
        messages[name] = raised_by(torch.neuron.synchronize)
        if name == "B":
            b_done.set()

    threads = [threading.Thread(target=issue, args=("A", table)), threading.Thread(target=issue, args=("B", other_table))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # B synchronises first and is told of both; A is then told of its own, which B's raise did not handle.
    assert "2 queued ops failed" in messages["B"], messages
    a, b = "aten::index_select(Float[10, 4], 0, Long[3])", "aten::index_select(Float[10, 6], 0, Long[3])"
    assert a in messages["B"] and b in messages["B"]
    assert a in messages["A"] and b not in messages["A"] and "queued ops failed" not in messages["A"]


LAST_OP_FAILS = """
import torch, localneuron
table = torch.randn(10, 4, device="neuron")
x = torch.ones(8, device="neuron")
torch.index_select(table, 0, torch.tensor([1], device="neuron"))
x * 2  # both signatures' first calls run when issued: the next ones are queued
index = torch.tensor([30], device="neuron")
torch.neuron._sleep(100_000_000)
out = torch.index_select(table, 0, index)  # fails, queued
y = x * 2  # queued: no synchronisation point after the failure
"""
LINE_OF_THE_FAILURE = 9


def check_reports_failure(done, script_line):
    assert done.returncode != 0, (done.returncode, done.stdout, done.stderr)
    assert "out of range" in done.stderr, done.stderr
    if BLOCKING:  # raised where it was issued, as on the CPU: the traceback holds the user's line
        path, line = script_line.rsplit(":", 1)
        assert f'File "{path}", line {line}' in done.stderr, done.stderr
    else:  # reported at exit: the report names the op, its arguments and the line that issued it
        assert "aten::index_select" in done.stderr, done.stderr
        assert "Float[10, 4], 0, Long[1]" in done.stderr and script_line in done.stderr, done.stderr


def test_a_script_whose_last_op_fails_exits_non_zero(tmp_path):
    script = write(tmp_path / "last_op_fails.py", LAST_OP_FAILS)
    done = run_script([str(script)], timeout=120)
    check_reports_failure(done, f"{script}:{LINE_OF_THE_FAILURE}")
    if not BLOCKING:
        assert done.returncode == 1


def test_localneuron_run_of_a_script_whose_last_op_fails_exits_non_zero(tmp_path):
    script = write(tmp_path / "last_op_fails.py", LAST_OP_FAILS)
    done = localneuron("run", str(script), timeout=300)
    check_reports_failure(done, f"{script}:{LINE_OF_THE_FAILURE}")


def test_a_failure_already_raised_does_not_fail_the_exit(tmp_path):
    script = write(tmp_path / "handled.py", LAST_OP_FAILS + """
try:
    torch.neuron.synchronize()
except RuntimeError as error:
    print("handled:", "index_select" in str(error))
""")
    done = run_script([str(script)], timeout=120)
    if BLOCKING:
        assert done.returncode == 1 and "out of range" in done.stderr
        return
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["handled:", "True"] and "at exit" not in done.stderr
