"""torch.profiler on the neuron device (docs/support-matrix.md#profiling): framework ops, runtime events and an
estimated device timeline per NeuronCore engine, linked by flow events, in key_averages() and the Chrome trace."""
import json
import textwrap
import warnings

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from chrome_trace_check import check
from fresh_python import run_python
from localneuron.adaptive_eager import engine
from localneuron.ops import tracking
from localneuron.costmodel import work as device_work
from localneuron.profiler import kineto_bridge

BOTH = [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]


def step(x, w):
    return (x @ w).relu().sum()


@pytest.fixture(autouse=True)
def unfused():
    """These tests read each op's own device events; with TORCH_NEURONX_ENABLE_CONCATENATION=1 a fused run
    shows as one executable instead (tests/execution/test_adaptive_eager.py tests that trace)."""
    with engine.switched(False):
        yield


@pytest.fixture
def warm():
    x, w = torch.randn(32, 48, device="neuron"), torch.randn(48, 16, device="neuron")
    for _ in range(3):
        step(x, w).item()
    return x, w


def trace_of(prof, tmp_path) -> dict:
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    return json.loads(path.read_text())


def device_events(trace: dict) -> list[dict]:
    return [e for e in trace["traceEvents"] if e.get("ph") == "X" and isinstance(e.get("pid"), int)
            and e["pid"] >= kineto_bridge.NEURON_HW_PID_BASE]


def estimate_us(op: str, signature: str) -> float:
    matches = {e.estimated_seconds for e in tracking._executables if e.op == op and e.signature == signature}
    assert len(matches) == 1, (op, signature, matches)
    return matches.pop() * 1e6


def test_key_averages_show_estimated_device_time_per_op(warm):
    x, w = warm
    with profile(activities=BOTH, record_shapes=True) as prof:
        step(x, w).item()
    rows = {e.key: e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CPU}
    mm = rows["aten::mm"]
    assert mm.self_device_time_total == pytest.approx(estimate_us("aten::mm", "float32[32, 48], float32[48, 16]"),
                                                      abs=1e-3)
    assert rows["aten::relu"].self_device_time_total > 0
    assert rows["aten::sum"].self_device_time_total > 0
    assert "NEURON" in prof.key_averages().table(row_limit=5)  # the device columns are labelled by device name


def test_framework_ops_keep_shapes_and_source_lines(warm, tmp_path):
    x, w = warm
    with profile(activities=BOTH, record_shapes=True, with_stack=True) as prof:
        step(x, w).item()
    mm = next(e for e in prof.events() if e.name == "aten::mm")
    assert [32, 48] in mm.input_shapes
    events = trace_of(prof, tmp_path)["traceEvents"]
    cpu_mm = next(e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::mm")
    callers = [e["name"] for e in events if e.get("cat") == "python_function" and e["tid"] == cpu_mm["tid"]
               and e["ts"] <= cpu_mm["ts"] and cpu_mm["ts"] + cpu_mm["dur"] <= e["ts"] + e["dur"]]
    assert any("test_profiler.py(" in name and name.endswith("): step") for name in callers), callers


def test_chrome_trace_is_valid_and_has_one_track_per_core_engine(warm, tmp_path):
    x, w = warm
    with profile(activities=BOTH) as prof:
        step(x, w).item()
    trace = trace_of(prof, tmp_path)
    assert check(trace) == []
    core0 = kineto_bridge.hw_pid(0)
    names = {(e["name"], e["tid"]): e["args"] for e in trace["traceEvents"] if e.get("ph") == "M" and e["pid"] == core0}
    assert names[("process_name", 0)]["name"] == "neuron_hw NC0"
    tracks = [names[("thread_name", i)]["name"] for i in range(len(device_work.TRACKS))]
    assert tracks == list(device_work.TRACKS)
    on = {e["name"]: device_work.TRACKS[e["tid"]] for e in device_events(trace)}
    assert on["aten::mm"] == device_work.TENSOR_E
    assert on["aten::relu"] == device_work.VECTOR_E
    assert on["neuron_rt::copy_device_to_host"] == device_work.DMA  # the .item()
    assert all(e["args"]["estimated"] is True for e in device_events(trace))


def test_device_events_link_to_the_framework_op_that_issued_them(warm, tmp_path):
    x, w = warm
    with profile(activities=BOTH) as prof:
        step(x, w).item()
    trace = trace_of(prof, tmp_path)
    events = trace["traceEvents"]
    cpu_mm = next(e for e in events if e.get("cat") == "cpu_op" and e["name"] == "aten::mm")
    device_mm = next(e for e in device_events(trace) if e["name"] == "aten::mm")
    assert device_mm["args"]["External id"] == cpu_mm["args"]["External id"]
    launch = next(e for e in events if e.get("cat") == "privateuse1_runtime" and e["name"] == "neuron_rt::execute"
                  and e["args"]["op"] == "aten::mm")
    assert launch["args"]["cache"] == "hit" and launch["tid"] == cpu_mm["tid"]
    assert cpu_mm["ts"] <= launch["ts"] and launch["ts"] + launch["dur"] <= cpu_mm["ts"] + cpu_mm["dur"] + 1
    flows = {e["id"]: e for e in events if e.get("ph") in ("s", "f") and e["cat"] == "ac2g" and e["ph"] == "f"
             and e["pid"] == device_mm["pid"] and e["ts"] == device_mm["ts"]}
    starts = [e for e in events if e.get("ph") == "s" and e["id"] in flows]
    assert [(s["pid"], s["tid"], s["ts"]) for s in starts] == [(launch["pid"], launch["tid"], launch["ts"])]


def test_simulated_clock_queues_work_per_core(warm, tmp_path):
    x, w = warm
    with profile(activities=BOTH) as prof:
        for _ in range(3):
            step(x, w).item()
    spans = sorted((e for e in device_events(trace_of(prof, tmp_path)) if e["tid"] != device_work.TRACKS.index("DMA")),
                   key=lambda e: e["ts"])
    for before, after in zip(spans, spans[1:]):  # one executable at a time on a core, whatever its engine
        assert after["ts"] >= before["ts"] + before["dur"] - 1e-3


def issued_and_placed(trace) -> list[tuple[int, object]]:
    """(issue time on the simulated host clock, device span) for each device span of a kineto_bridge.LastTrace
    (runtime events carry the wall clock; the device clock places work at the simulated host's time)."""
    issued = {a[8]: trace.host_clock.simulated(a[4]) for a in trace.runtime if a[8]}
    return sorted(((issued[s.flow], s) for s in trace.spans if s.flow in issued), key=lambda p: p[1].start_ns)


def queued_adds(x, count: int) -> list[tuple[int, object]]:
    """Issues `count` in-place adds behind a busy worker (a queued 100 ms sleep: the worker runs none of them
    while the host issues, so the host has both cores' worth of time to itself) and returns (issue time,
    device span) for each. `count` stays below the queue's bound of 128 entries (csrc/queue/queue.cpp): past
    it the host would wait for the sleeping worker, and the device clock, which does not show the sleep,
    would see a host that paused."""
    with profile(activities=BOTH):
        torch.neuron._sleep(140_000_000)  # cycles at 1.4 GHz
        for _ in range(count):
            x.add_(x)
        torch.neuron.synchronize()
    placed = issued_and_placed(kineto_bridge.last_trace)
    assert len(placed) == count
    return placed


def test_device_queue_builds_up_when_the_host_issues_faster_than_the_core_runs(warm):
    """Tiny ops cost the device its per-executable overhead; a loop issues them faster than that, so the
    core's queue grows: each op starts when the previous one ends, later and later after its issue.

    Issue times are the host's wall clock with the device's work taken out, so on a machine whose cores
    other processes hold, the host can be descheduled for milliseconds between two issues and then is
    no faster than the core (in CI, 300 issues outlasted their 4.5 ms of device work). The rule that
    places work is checked on every attempt; the build-up on an attempt whose host issued four times faster
    than the core ran, which the trace itself shows."""
    x = torch.ones(8, device="neuron")
    for _ in range(3):
        x.add_(x)
    spans_total = issue_span = 0
    for _ in range(5):
        placed = queued_adds(x, 100)
        for (_, a), (issued, b) in zip(placed, placed[1:]):
            assert b.start_ns == max(issued, a.end_ns)  # starts at its issue or when the core frees, never idles
        spans_total = sum(s.end_ns - s.start_ns for _, s in placed)
        issue_span = placed[-1][0] - placed[0][0]
        if issue_span < spans_total / 4:  # then at least 75 ops start back to back (the core idles for no issue)
            break
    else:
        pytest.skip(f"the host never issued faster than the core ran (100 issues took {issue_span / 1e6:.2f} ms "
                    f"for {spans_total / 1e6:.2f} ms of device work): the machine is loaded")
    spans = [s for _, s in placed]
    waits = [s.start_ns - issued for issued, s in placed]
    assert sum(b.start_ns == a.end_ns for a, b in zip(spans, spans[1:])) > 74  # the core never idles while work is queued
    assert waits[-1] > 10 * (spans[-1].end_ns - spans[-1].start_ns)  # the last op waited behind many others


def test_cpu_fallback_shows_host_copies_not_device_compute(warm, tmp_path, quiet):
    with profile(activities=BOTH) as prof:
        torch.randn(8, 8, device="neuron")  # aten::normal_ falls back to the CPU (docs/support-matrix.md#eager-ops)
    trace = trace_of(prof, tmp_path)
    runtime = [e for e in trace["traceEvents"] if e.get("cat") == "privateuse1_runtime"]
    assert any(e["name"] == "neuron_rt::cpu_fallback" and e["args"]["op"] == "aten::normal_" for e in runtime)
    device = device_events(trace)
    assert not any(e["name"] == "aten::normal_" for e in device)
    assert {e["name"] for e in device} >= {"neuron_rt::copy_device_to_host", "neuron_rt::copy_host_to_device"}


def test_64bit_route_is_named_in_the_runtime_layer(tmp_path, quiet):
    a = torch.arange(6, device="neuron", dtype=torch.float64)
    (a * 2).sum()
    with profile(activities=BOTH) as prof:
        (a * 2).sum()
    names = {e["name"] for e in trace_of(prof, tmp_path)["traceEvents"] if e.get("cat") == "privateuse1_runtime"}
    assert "neuron_rt::execute_64bit_as_32bit" in names


def test_profiling_without_warm_up_warns_and_shows_the_compiles(tmp_path):
    x = torch.randn(7, 13, device="neuron")
    with pytest.warns(UserWarning, match="Warm up"):
        with profile(activities=BOTH) as prof:
            (x * 3).tanh()
    compiles = [e for e in trace_of(prof, tmp_path)["traceEvents"] if e.get("name") == "neuron_rt::compile"]
    assert {e["args"]["op"] for e in compiles} >= {"aten::mul", "aten::tanh"}
    assert all(e["args"]["estimated_device_us"] > 0 for e in compiles)


def test_forgetting_privateuse1_gives_cpu_ops_only_and_a_hint(warm, tmp_path):
    x, w = warm
    with profile(activities=BOTH):  # a device trace first: the next one must not inherit its session
        step(x, w).item()
    code = textwrap.dedent("""
        import warnings, torch
        from torch.profiler import profile, ProfilerActivity
        x = torch.randn(4, 4, device="neuron"); (x + 1).sum().item()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with profile(activities=[ProfilerActivity.CPU]) as prof:
                (x + 1).sum().item()
        print("HINT" if any("ProfilerActivity.PrivateUse1" in str(w.message) for w in caught) else "NO HINT")
        print(sum(e.self_device_time_total for e in prof.key_averages()))
    """)
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["HINT", "0"]
    # also when nothing inside the trace reads device data (the hint then comes when the trace starts)
    no_sync = code.replace("(x + 1).sum().item()\nprint", "(x + 1).sum(); torch.neuron.synchronize()\nprint")
    assert no_sync != code
    result = run_python(no_sync)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["HINT", "0"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            step(x, w).item()
    assert device_events(trace_of(prof, tmp_path)) == []


def test_compiled_graph_launch_is_one_device_event(tmp_path, quiet):
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).to("neuron")
    compiled = torch.compile(model, backend="neuron")
    x = torch.randn(8, 16, device="neuron")
    with torch.no_grad():
        for _ in range(3):
            compiled(x)
        with profile(activities=BOTH) as prof:
            compiled(x)
    trace = trace_of(prof, tmp_path)
    assert check(trace) == []
    graphs = [e for e in trace["traceEvents"] if e.get("name") == "neuron_rt::execute_graph"]
    assert len(graphs) == 1
    device = [e for e in device_events(trace) if e["name"] == graphs[0]["args"]["name"]]
    assert len(device) == 1 and device[0]["dur"] > 0


def test_collectives_have_bytes_and_their_own_track():
    code = textwrap.dedent("""
        import json, os, tempfile, torch, torch.distributed as dist
        from torch.profiler import profile, ProfilerActivity
        from localneuron.costmodel import work as device_work
        dist.init_process_group("neuron", init_method="file://" + tempfile.mktemp(), rank=0, world_size=1)
        t = torch.ones(1024, device="neuron")
        for _ in range(3):
            dist.all_reduce(t)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            dist.all_reduce(t)
            (t * 2).sum().item()
        path = tempfile.mktemp(suffix=".json")
        prof.export_chrome_trace(path)
        events = json.load(open(path))["traceEvents"]
        runtime = [e for e in events if e.get("name") == "neuron_rt::collective"]
        device = [e for e in events if e.get("cat") == "kernel" and e.get("tid") == device_work.TRACKS.index("Collectives")]
        print(json.dumps([runtime[0]["args"]["bytes"], device[0]["name"]]))
        dist.destroy_process_group()
    """)
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.strip().splitlines()[-1]) == [4096, "all_reduce"]


# Tiny ops cost the core ~15 us each and the host ~1 us to issue: a backlog of ~0.3 s on the device,
# far longer than the host takes to issue the all-reduce, even on a loaded machine.
QUEUED_BEFORE = 20000


def profiled_after_warm_up(step):
    """Rank job's end: three warm-up steps, one profiled, the group destroyed; the placed device spans."""
    import torch.distributed as dist

    for _ in range(3):
        step()
    torch.neuron.synchronize()
    with profile(activities=BOTH):
        step()
        torch.neuron.synchronize()
    dist.destroy_process_group()
    return issued_and_placed(kineto_bridge.last_trace)


def overlap_job():
    """Rank job: compute queued on the core, then an asynchronous all-reduce, then more compute that
    does not read its result. On the device the all-reduce waits for the compute issued before it and
    runs on the collectives queue while the compute issued after it proceeds."""
    import os

    import torch.distributed as dist

    torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("neuron")
    x, grads = torch.ones(8, device="neuron"), torch.ones(1 << 20, device="neuron")

    def step():
        for _ in range(QUEUED_BEFORE):
            x.add_(x)
        work = dist.all_reduce(grads, async_op=True)
        for _ in range(200):
            x.add_(x)
        work.wait()

    return [(s.track, s.start_ns, s.end_ns) for _, s in profiled_after_warm_up(step)]


def test_collectives_overlap_the_compute_issued_after_them_on_two_ranks():
    from distributed_launcher import run

    for spans in run(__file__, "overlap_job", 2, backends=None, timeout=240):
        (collective,) = [s for s in spans if s[0] == device_work.COLLECTIVES]
        compute = [s for s in spans if s[0] not in (device_work.COLLECTIVES, device_work.DMA)]
        assert len(compute) == QUEUED_BEFORE + 200
        before, after = compute[:QUEUED_BEFORE], compute[QUEUED_BEFORE:]
        assert collective[1] >= before[-1][2]  # its input is ready only when the queued compute has run
        overlapping = [s for s in after if s[1] < collective[2] and collective[1] < s[2]]
        assert overlapping, (collective, before[-1], after[:3])  # the core computes while the all-reduce runs


def test_simulated_host_clock_takes_out_the_time_spent_on_device_work():
    from localneuron.profiler.host_clock import HostClock

    host = HostClock()
    assert host.simulated(100) == 100  # the clocks agree until the host does device work
    host.skip(100, 150)                # an executable's arithmetic, run on the host
    host.skip(120, 160)                # work issued inside it (another thread): only 150..160 is new
    assert [host.simulated(t) for t in (110, 155, 160, 200)] == [100, 100, 100, 140]
    host.wait_until(200, 170)          # a copy back to the host: the host waited for the device
    assert host.simulated(200) == 170 and host.simulated(210) == 180
    host.wait_until(210, 100)          # the device was done long before: no wait
    assert host.simulated(220) == 190


COMPUTE_ENGINES = {device_work.TENSOR_E, device_work.VECTOR_E, device_work.SCALAR_E, device_work.GPSIMD_E}


def ddp_job():
    """Rank job: one profiled DDP training step of a 12-layer MLP (48 MiB of gradients in DDP's default
    buckets: 1 MiB, then 25 MiB, issued while backward still has layers to go, then the rest). The step
    is device-bound, as training steps are on Trainium: tiny ops queued ahead of backward keep the core
    busy longer than the host takes to issue backward, however loaded the machine running the test."""
    import os

    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("neuron")
    torch.manual_seed(0)
    layers = [torch.nn.Sequential(torch.nn.Linear(1024, 1024), torch.nn.ReLU()) for _ in range(12)]
    model = DistributedDataParallel(torch.nn.Sequential(*layers).to("neuron"))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, queued = torch.randn(32, 1024, device="neuron"), torch.ones(8, device="neuron")

    def step():
        optimizer.zero_grad()
        loss = model(x).square().mean()
        for _ in range(QUEUED_BEFORE // 4):
            queued.add_(queued)
        loss.backward()
        optimizer.step()

    return [(issued, s.track, s.name, s.start_ns, s.end_ns) for issued, s in profiled_after_warm_up(step)]


def test_ddp_all_reduce_overlaps_the_rest_of_backward_on_two_ranks():
    """On the simulated clocks a bucket's all-reduce runs on the collectives queue while the core goes on
    with backward; it waits for the compute issued before it (its gradients), and the optimizer, issued
    once the host has seen the all-reduce complete, waits for it."""
    from distributed_launcher import run

    for placed in run(__file__, "ddp_job", 2, backends=None, timeout=240):
        collectives = [p for p in placed if p[1] == device_work.COLLECTIVES]
        compute = [p for p in placed if p[1] in COMPUTE_ENGINES]
        assert len(collectives) >= 2, collectives
        for issued, _, _, start, end in collectives:
            assert all(c[4] <= start for c in compute if c[0] < issued)  # its inputs are computed first
        overlapping = [c for c in compute for _, _, _, start, end in collectives[:-1] if c[3] < end and start < c[4]]
        assert any(c[2] in ("aten::mm", "aten::threshold_backward") for c in overlapping), (collectives, compute)
        optimizer = [c for c in compute if c[2].startswith("aten::_foreach_")]
        assert optimizer and min(c[3] for c in optimizer) >= max(c[4] for c in collectives), (optimizer, collectives)


def test_the_trace_checker_rejects_broken_traces():
    good = {"traceEvents": [
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "p"}},
        {"ph": "X", "cat": "kernel", "name": "a", "pid": 1, "tid": 0, "ts": 1.0, "dur": 2.0},
        {"ph": "s", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 2, "tid": 2, "ts": 0.5},
        {"ph": "f", "cat": "ac2g", "name": "ac2g", "id": 5, "pid": 1, "tid": 0, "ts": 1.0, "bp": "e"},
    ]}
    assert check(good) == []
    unpaired = {"traceEvents": good["traceEvents"][:3]}
    assert any("1 starts, 0 ends" in p for p in check(unpaired))
    backwards = {"traceEvents": good["traceEvents"][:2] + [dict(good["traceEvents"][1], ts=0.5)]}
    assert any("starts before" in p for p in check(backwards))
    assert check({"traceEvents": [{"ph": "Q", "pid": 1, "tid": 1, "ts": 0}]}) != []
    assert check({"traceEvents": [{"ph": "M", "name": "colour", "pid": 1, "tid": 0, "args": {"x": 1}}]}) != []
