"""Device work is priced once, by the cost model, on its real inputs and outputs, and the trace shows that price.

The lock: each span of a torch.profiler trace (its duration and its engine track) equals an independent call of
the cost model (localneuron/costmodel/work.py) on what the same program computes on the CPU: the aten ops a
dispatch mode sees there, with their real outputs. The ops here are chosen so that an output differs in size from
the largest input (reductions, gathers, matmuls with k much larger than n, broadcasts, pooling, padding): a price
guessed from the operands alone differs from the right one. `localneuron estimate` is one more view: its eager
forward time of a model is the sum of the spans the same forward shows on the device."""
import json
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from localneuron.adaptive_eager import engine
from localneuron.costmodel import work as device_work
from localneuron.ops.arguments import returns_view
from localneuron.profiler import kineto_bridge
from localneuron.runtime.config import selected_target

torch.manual_seed(0)


def _indices(high, *shape):
    return torch.randint(0, high, shape)


# name -> (function, its inputs on the CPU)
CASES = {
    "embedding": (lambda w, i: F.embedding(i, w), (torch.randn(4000, 64), _indices(4000, 8, 16))),
    "index_select": (lambda x, i: x.index_select(0, i), (torch.randn(2048, 64), _indices(2048, 32))),
    "gather": (lambda x, i: x.gather(1, i), (torch.randn(256, 512), _indices(512, 256, 4))),
    "advanced indexing": (lambda x, i: x[i], (torch.randn(1024, 32), _indices(1024, 16))),
    "sum over a dim": (lambda x: x.sum(-1), (torch.randn(512, 2048),)),
    "mean over a dim": (lambda x: x.mean(0), (torch.randn(512, 2048),)),
    "amax": (lambda x: x.amax(-1), (torch.randn(256, 1024),)),
    "max with indices": (lambda x: x.max(-1), (torch.randn(256, 1024),)),
    "argmax": (lambda x: x.argmax(-1), (torch.randn(256, 1024),)),
    "var": (lambda x: x.var(-1), (torch.randn(256, 1024),)),
    "vector norm": (lambda x: torch.linalg.vector_norm(x), (torch.randn(512, 512),)),
    "topk": (lambda x: x.topk(4, dim=-1), (torch.randn(128, 1024),)),
    "mm, k >> n": (lambda a, b: a @ b, (torch.randn(64, 4096), torch.randn(4096, 8))),
    "bmm, k >> n": (torch.bmm, (torch.randn(4, 32, 2048), torch.randn(4, 2048, 8))),
    "addmm, k >> n": (torch.addmm, (torch.randn(8), torch.randn(32, 4096), torch.randn(4096, 8))),
    "broadcast add": (lambda a, b: a + b, (torch.randn(512, 1), torch.randn(1, 512))),
    "broadcast mul": (lambda a, b: a * b, (torch.randn(256, 1, 64), torch.randn(1, 128, 64))),
    "where with broadcast": (lambda c, a, b: torch.where(c > 0, a, b),
                             (torch.randn(256, 1), torch.randn(1, 256), torch.randn(256, 256))),
    "cat": (lambda a, b, c: torch.cat([a, b, c]), (torch.randn(64, 128), torch.randn(64, 128), torch.randn(64, 128))),
    "repeat": (lambda x: x.repeat(4, 2), (torch.randn(64, 64),)),
    "constant pad": (lambda x: F.pad(x, (8, 8, 8, 8)), (torch.randn(4, 32, 32),)),
    "strided convolution": (lambda x, w: F.conv2d(x, w, stride=2), (torch.randn(2, 8, 32, 32), torch.randn(4, 8, 3, 3))),
    "max pool": (lambda x: F.max_pool2d(x, 2), (torch.randn(2, 8, 32, 32),)),
    "avg pool": (lambda x: F.avg_pool2d(x, 4), (torch.randn(2, 8, 32, 32),)),
    "softmax": (lambda x: x.softmax(-1), (torch.randn(512, 2048),)),
    "cumsum": (lambda x: x.cumsum(-1), (torch.randn(512, 2048),)),
}


class _Calls(TorchDispatchMode):
    """The aten ops a program runs, with their real inputs and outputs (views left out: they run no work)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if not returns_view(func._schema):
            tensors = lambda tree: [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]  # noqa: E731
            self.calls.append((func._schema.name, tensors((args, kwargs)), tensors(out)))
        return out


def cost_model_on_the_cpu(fn, inputs) -> list[device_work.DeviceWork]:
    with _Calls() as mode:
        fn(*inputs)
    return [device_work.price_op(selected_target(), name, ins, outs) for name, ins, outs in mode.calls]


def device_spans(prof, tmp_path) -> list[dict]:
    """The trace's events on the NeuronCores' tracks, as a user's viewer reads them, in the order they start."""
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    return sorted((e for e in events if e.get("ph") == "X" and isinstance(e.get("pid"), int)
                   and e["pid"] >= kineto_bridge.NEURON_HW_PID_BASE), key=lambda e: e["ts"])


def spans_on_the_device(fn, inputs, tmp_path) -> list[dict]:
    on_device = [t.to("neuron") for t in inputs]
    fn(*on_device)  # each signature's first call, outside the trace
    torch.neuron.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        fn(*on_device)
        torch.neuron.synchronize()
    return device_spans(prof, tmp_path)


@pytest.fixture(autouse=True)
def one_executable_per_op():
    """With Adaptive Eager's concatenation on, a fused run would show as one executable."""
    with engine.switched(False):
        yield


def test_at_least_twenty_cases_have_an_output_unlike_their_largest_input():
    differing = []
    for name, (fn, inputs) in CASES.items():
        with _Calls() as mode:
            fn(*inputs)
        if any(sum(t.numel() for t in outs) != max(t.numel() for t in ins) for _, ins, outs in mode.calls):
            differing.append(name)
    assert len(differing) >= 20, differing


@pytest.mark.parametrize("case", CASES)
def test_each_span_is_the_cost_models_price_on_the_real_outputs(case, tmp_path):
    fn, inputs = CASES[case]
    want = cost_model_on_the_cpu(fn, inputs)
    got = spans_on_the_device(fn, inputs, tmp_path)
    assert [e["name"] for e in got] == [w.name for w in want]
    for event, priced in zip(got, want):
        assert device_work.TRACKS[event["tid"]] == priced.engine, (event["name"], priced)
        assert event["dur"] == pytest.approx(max(1, round(priced.seconds * 1e9)) / 1e3, abs=2e-3), (event, priced)


def test_copies_are_priced_by_direction_and_size(tmp_path):
    chip = selected_target()
    host = torch.randn(256, 1024)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        host.to("neuron").cpu()
    copies = {e["name"]: e for e in device_spans(prof, tmp_path)}
    for direction in ("host_to_device", "device_to_host"):
        priced = device_work.price_copy(chip, direction, host.nbytes)
        event = copies[f"neuron_rt::copy_{direction}"]
        assert device_work.TRACKS[event["tid"]] == device_work.DMA
        assert event["dur"] == pytest.approx(priced.seconds * 1e6, abs=2e-3)


COLLECTIVE_BYTES = {"all_reduce": 1 << 20, "all_gather_into_tensor": 1 << 10, "reduce_scatter_tensor": 256 << 10}


def collectives_job():
    """Rank job: one profiled call of each collective in COLLECTIVE_BYTES (bytes: the larger of its input and
    output on one rank); the spans on the collective track as (name, duration in µs)."""
    import os

    import torch.distributed as dist

    torch.neuron.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("neuron")
    ranks = dist.get_world_size()
    reduced = torch.ones(COLLECTIVE_BYTES["all_reduce"] // 4, device="neuron")
    shard = torch.ones(COLLECTIVE_BYTES["all_gather_into_tensor"] // 4 // ranks, device="neuron")
    gathered = torch.empty(shard.numel() * ranks, device="neuron")
    scattered = torch.ones(COLLECTIVE_BYTES["reduce_scatter_tensor"] // 4, device="neuron")
    out = torch.empty(scattered.numel() // ranks, device="neuron")
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        dist.all_reduce(reduced)
        dist.all_gather_into_tensor(gathered, shard)
        dist.reduce_scatter_tensor(out, scattered)
        torch.neuron.synchronize()
    dist.destroy_process_group()
    return [(s.name, s.track, (s.end_ns - s.start_ns) / 1e3) for s in kineto_bridge.last_trace.spans
            if s.track == device_work.COLLECTIVES]


def test_collective_spans_are_the_price_of_the_collective_among_its_ranks():
    """What the distributed statistics and the report's line time charge (collectives.c10d_seconds), not an
    element-wise op on the buffer's bytes."""
    from distributed_launcher import run

    chip = selected_target()
    for spans in run(__file__, "collectives_job", 2, backends=None, timeout=240):
        assert [name for name, _, _ in spans] == list(COLLECTIVE_BYTES)
        for name, _, us in spans:
            priced = device_work.price_collective(chip, name, COLLECTIVE_BYTES[name], 2)
            assert us == pytest.approx(max(1, round(priced.seconds * 1e9)) / 1e3, abs=1e-3), (name, us, priced)


def per_call_estimate(before: dict, after: dict) -> float:
    """The report's estimate per call of the one compiled graph that ran between two device_time snapshots."""
    (name,) = [g for g in after if after[g]["calls"] != before.get(g, {}).get("calls", 0)]
    was = before.get(name, {"calls": 0, "estimated_seconds": 0.0})
    return (after[name]["estimated_seconds"] - was["estimated_seconds"]) / (after[name]["calls"] - was["calls"])


def test_a_compiled_graph_is_one_span_priced_on_the_graph_its_backend_received(tmp_path):
    """The graph AOTAutograd hands the backend, captured here on the CPU with the same decompositions, priced by
    the cost model's fused-graph rule: the trace's one launch and the report's per-call estimate are that price."""
    from torch._dynamo.backends.common import aot_autograd
    from torch._inductor.decomposition import select_decomp_table

    from localneuron.compiler import device_time

    def step(x, w):
        return (x @ w).relu().sum(-1)

    x, w = torch.randn(64, 4096), torch.randn(4096, 8)
    captured = []

    def capture(gm, example_inputs):
        captured.append(gm)
        return gm

    torch._dynamo.reset()
    with torch.no_grad():
        torch.compile(step, backend=aot_autograd(fw_compiler=capture, decompositions=select_decomp_table()))(x, w)
        (gm,) = captured
        priced = device_work.price_graph(selected_target(), "step", *device_time.graph_ops(gm))
        torch._dynamo.reset()
        compiled = torch.compile(step, backend="neuron")
        compiled(x.to("neuron"), w.to("neuron"))  # compiled outside the snapshots
        before = device_time.estimated_seconds()
        spans = spans_on_the_device(compiled, (x, w), tmp_path)
    (graph,) = spans  # one launch, named after the model, and nothing else on the device
    assert graph["name"] == "model_default_forward"
    assert device_work.TRACKS[graph["tid"]] == priced.engine == device_work.TENSOR_E
    assert graph["dur"] == pytest.approx(max(1, round(priced.seconds * 1e9)) / 1e3, abs=2e-3)
    assert per_call_estimate(before, device_time.estimated_seconds()) == pytest.approx(priced.seconds, rel=1e-12)


def test_a_compiled_graph_moves_its_inputs_and_results_through_hbm():
    """A fused graph reads its inputs from HBM once and writes its results once; what it computes in between (x @ w
    and its relu) stays on chip (costmodel/ops.graph). Its span's record carries those bytes, so the step's MBU in
    the profile summary counts them: bytes over the window and the core's share of HBM bandwidth."""
    from localneuron.profiler import profile_files

    def step(x, w):
        return (x @ w).relu().sum(-1)

    torch._dynamo.reset()
    compiled = torch.compile(step, backend="neuron")
    x, w = torch.randn(64, 4096).to("neuron"), torch.randn(4096, 8).to("neuron")
    with torch.no_grad():
        compiled(x, w)  # compiled outside the trace
        torch.neuron.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
            out = compiled(x, w)
            torch.neuron.synchronize()
    moved = sum(t.numel() * t.element_size() for t in (x, w, out))
    (graph,) = kineto_bridge.last_trace.spans
    assert graph.work.kind == "graph" and graph.work.bytes == moved
    (summary,) = profile_files._summary(kineto_bridge.last_trace, [])["steps"]
    chip = selected_target()
    window = (graph.end_ns - graph.start_ns) * 1e-9
    assert summary["hbm_bytes"] == moved
    assert summary["mbu"] > 0
    assert summary["mbu"] == pytest.approx(moved / (window * chip.hbm_bytes_per_s * chip.lnc / chip.physical_cores))


def test_an_nki_kernel_span_is_its_cycle_model_timing(tmp_path):
    import nki
    import nki.language as nl

    @nki.jit
    def scaled_add(a, b):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.load(a), nl.multiply(nl.load(b), 2.0)))
        return out

    a, b = torch.randn(128, 512), torch.randn(128, 512)
    report = nki.benchmark(scaled_add)(a.numpy(), b.numpy())
    priced = device_work.price_kernel("scaled_add", report.latency_ns, report.engine_busy_ns)
    spans = spans_on_the_device(scaled_add, (a, b), tmp_path)
    (kernel,) = [e for e in spans if e["name"] == "scaled_add"]
    assert device_work.TRACKS[kernel["tid"]] == priced.engine
    assert kernel["dur"] == pytest.approx(max(1, round(priced.seconds * 1e9)) / 1e3, abs=2e-3)


def test_a_split_graph_costs_what_its_compiled_pieces_launch(tmp_path, quiet):
    """An op that runs eagerly (a CPU fallback here) splits the graph: the report's per-call estimate is the sum
    of the pieces' launches the trace shows (the eager op is priced, and shown, as an eager op)."""
    from localneuron.compiler import device_time

    def step(x, w):
        return torch.linalg.inv(x @ w + 4 * torch.eye(64, device=x.device)).sum(-1)

    torch._dynamo.reset()
    x, w = torch.randn(64, 256), torch.randn(256, 64)
    compiled = torch.compile(step, backend="neuron")
    with torch.no_grad():  # linalg_inv_ex falls back to the CPU (warned once per process)
        compiled(x.to("neuron"), w.to("neuron"))
        before = device_time.estimated_seconds()
        spans = spans_on_the_device(compiled, (x, w), tmp_path)
    pieces = [e for e in spans if e["name"] == "model_default_forward"]
    assert len(pieces) == 2, [e["name"] for e in spans]
    assert per_call_estimate(before, device_time.estimated_seconds()) == pytest.approx(
        sum(e["dur"] for e in pieces) / 1e6, abs=4e-9)


# "aten::name[, variant]" -> (a call of the op, the shapes of the float32 tensors it is given): what the device issues
# for it run eagerly, against what estimate prices
ISSUE_CASES = {
    "aten::_copy_from": (lambda x, y: torch.ops.aten._copy_from(x, y), [(64, 32), (64, 32)]),
    "aten::_to_copy": (lambda x: torch.ops.aten._to_copy(x, dtype=torch.bfloat16), [(64, 32)]),
    "aten::_unsafe_view": (lambda x: torch.ops.aten._unsafe_view(x, (32, 64)), [(64, 32)]),
    "aten::copy_": (lambda x, y: y.copy_(x), [(64, 32), (64, 32)]),
    "aten::copy_, broadcasting": (lambda x, y: y.copy_(x), [(1, 32), (64, 32)]),
    "aten::empty": (lambda: torch.empty(64, 32, device="neuron"), []),
    "aten::empty_strided": (lambda: torch.empty_strided((64, 32), (32, 1), device="neuron"), []),
    "aten::resize_": (lambda x: x.resize_(128, 64), [(64, 32)]),
    "aten::zeros": (lambda: torch.zeros(64, 32, device="neuron"), []),
    "aten::new_zeros": (lambda x: x.new_zeros(64, 32), [(4,)]),
    "aten::ones": (lambda: torch.ones(64, 32, device="neuron"), []),
    "aten::full": (lambda: torch.full((64, 32), 2.0, device="neuron"), []),
    "aten::new_empty": (lambda x: x.new_empty(64, 32), [(4,)]),
    "aten::new_empty_strided": (lambda x: x.new_empty_strided((64, 32), (32, 1)), [(4,)]),
    "aten::new_ones": (lambda x: x.new_ones(64, 32), [(4,)]),
    "aten::new_full": (lambda x: x.new_full((64, 32), 2.0), [(4,)]),
    "aten::empty_like": (torch.empty_like, [(64, 32)]),
    "aten::full_like": (lambda x: torch.full_like(x, 2.0), [(64, 32)]),
    "aten::zeros_like": (torch.zeros_like, [(64, 32)]),
    "aten::ones_like": (torch.ones_like, [(64, 32)]),
    "aten::arange": (lambda: torch.arange(64, device="neuron"), []),
    "aten::clone": (torch.clone, [(64, 32)]),
    "aten::contiguous": (lambda x: x.t().contiguous(), [(64, 32)]),
    "aten::view": (lambda x: x.view(32, 64), [(64, 32)]),
    "aten::reshape": (lambda x: x.reshape(32, 64), [(64, 32)]),
    "aten::reshape, copying": (lambda x: x.t().reshape(-1), [(64, 32)]),
    "aten::expand": (lambda x: x.expand(64, 32), [(1, 32)]),
    "aten::t": (torch.t, [(64, 32)]),
    "aten::transpose": (lambda x: x.transpose(0, 1), [(64, 32)]),
    "aten::permute": (lambda x: x.permute(1, 0), [(64, 32)]),
    "aten::detach": (torch.detach, [(64, 32)]),
    "aten::to": (lambda x: x.to(torch.bfloat16), [(64, 32)]),
    "aten::to, same dtype": (lambda x: x.to(torch.float32), [(64, 32)]),
}


def issued_on_the_device(fn, shapes) -> list[tuple]:
    """(kind, name, ns) of each piece of work the device issues for fn, its inputs made on the device beforehand."""
    fn(*[torch.randn(s).to("neuron") for s in shapes])  # each signature's first call, outside the trace
    inputs = [torch.randn(s).to("neuron") for s in shapes]
    torch.neuron.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]):
        fn(*inputs)
        torch.neuron.synchronize()
    return [(s.work.kind, s.work.name, s.end_ns - s.start_ns) for s in kineto_bridge.last_trace.spans]


def issued_in_the_estimate(fn, shapes) -> list[tuple]:
    """(kind, name, ns) of what `localneuron estimate` prices for fn run op by op (estimate/trace.py, on fake
    tensors: costmodel/ops.eager_issues, the price eager_sequence sums)."""
    from localneuron.costmodel.ops import eager_issues
    from localneuron.estimate.trace import Trace, fake_device

    with fake_device():
        inputs = [torch.empty(s, device="neuron") for s in shapes]
        with Trace() as trace:
            fn(*inputs)
    chip = selected_target()
    return [(kind, name, max(1, round(price.total * 1e9))) for p in trace.phases for op in p.ops
            for kind, name, price in eager_issues(chip, op)]


def test_every_record_that_says_what_the_device_issues_is_checked_here():
    from localneuron.ops.op_records import names_with

    assert set(names_with("issued")) <= set(ISSUE_CASES)


@pytest.mark.parametrize("case", ISSUE_CASES)
def test_estimate_prices_what_the_device_issues_for_an_eager_op(case):
    """The records' `issued` field (estimate/trace.py reads it) against the device: for each op with one, and for
    common creation and view ops, what `localneuron estimate` sums for it run op by op is what the device issues:
    nothing, one copy within HBM or executables, with the same names and prices."""
    fn, shapes = ISSUE_CASES[case]
    assert issued_in_the_estimate(fn, shapes) == issued_on_the_device(fn, shapes)


ESTIMATE_MODELS = Path(__file__).resolve().parents[1] / "support" / "estimate_models.py"


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
@pytest.mark.parametrize("factory", ["one_layer", "one_llama_layer"])
def test_estimates_eager_forward_is_the_sum_of_the_forwards_spans(factory, dtype, tmp_path):
    """`estimate --model-fn` traces the model on fake tensors; "the layers' forward launched op by op would take"
    is the time the device's spans show for that forward, run eagerly at the same shapes, dtype and target. The
    inputs are moved to the device before the trace: estimate charges no copy of them from the host."""
    from localneuron.estimate import factory as model_fn, plan
    from localneuron.estimate.layout import Layout
    from localneuron.estimate.trace import fake_device

    spec = f"{ESTIMATE_MODELS}:{factory}"
    model, inputs = model_fn.load(spec)()
    model = model.to("neuron", plan.DTYPES[dtype])
    with torch.no_grad():
        spans = spans_on_the_device(model, [t.to(plan.DTYPES[dtype]) for t in inputs], tmp_path)
    assert not [e for e in spans if e["name"] == "neuron_rt::copy_host_to_device"]
    chip = selected_target()
    with fake_device():
        _, result = model_fn.estimate(spec, Layout.make(chip, 1), plan.Request(mode="prefill", dtype=dtype))
    estimated_us = plan.compile_saving(*result["compiled_layers"])["eager_forward_s"] * 1e6
    # each span is a whole number of ns
    assert sum(e["dur"] for e in spans) == pytest.approx(estimated_us, abs=len(spans) * 0.5e-3)
