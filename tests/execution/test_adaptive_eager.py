"""Adaptive Eager (TORCH_NEURONX_ENABLE_CONCATENATION=1): runs of queued element-wise ops run as one
compiled executable, with the same bits as unfused eager, ending where TorchNeuron's runs end; segments with
matmuls run op by op with each op's kernel, and every fused operator is tracked once under its ops' names
joined by '|'."""
import types

import pytest
import torch
from torch.profiler import ProfilerActivity, profile

from fresh_python import run_python
from localneuron import _C
from localneuron.adaptive_eager import engine, native, report, stats
from localneuron.adaptive_eager.fusible_ops import FUSIBLE_OPS
from localneuron.ops import tracking
from localneuron.report import portability
from localneuron.runtime.environment import BY_NAME, read

pytestmark = pytest.mark.skipif(read("NEURON_LAUNCH_BLOCKING"),
                                reason="NEURON_LAUNCH_BLOCKING=1 queues nothing, so nothing is fused")


@pytest.fixture
def fusion():
    with engine.switched(True):
        stats.reset()
        yield stats
    stats.reset()


def three_ops(x, y):  # one run of three fusible ops
    return ((x * y) + 0.5).relu()


def warmed(fn, *args):
    """The fourth run of fn: the first call of each op runs synchronously (its outputs are learned), then a
    run's signature compiles on its second sighting and runs fused from there. Each result stays alive
    while the next call runs, as the measured call's does (which results are alive is part of a run's key)."""
    result = None
    for _ in range(3):
        result = fn(*args)
        torch.neuron.synchronize()
    del result
    stats.reset()
    result = fn(*args)
    torch.neuron.synchronize()
    return result


def test_a_run_is_fused_and_gives_the_unfused_bits(fusion):
    x, y = torch.randn(16), torch.randn(16)
    dx, dy = x.to("neuron"), y.to("neuron")
    fused = warmed(three_ops, dx, dy).cpu()
    s = stats.summary()
    assert s["fused_launches"] == 1 and s["fused_ops"] == 3 and s["launches_saved"] == 2
    with engine.switched(False):
        unfused = three_ops(dx, dy).cpu()
    assert torch.equal(fused, unfused)
    assert torch.equal(fused, three_ops(x, y))


def test_fused_runs_call_the_generated_kernels_from_cpp(fusion):
    x, y = torch.randn(16), torch.randn(16)
    dx, dy = x.to("neuron"), y.to("neuron")
    fused = warmed(three_ops, dx, dy)
    [executable] = stats.executables()
    # the C++ program ran the run; the generated Python wrapper (which needs the GIL) was not called
    assert executable.program is not None and executable.program.launches == 1 and executable.calls == 0
    assert torch.equal(fused.cpu(), three_ops(x, y))


def test_a_traced_fused_run_shows_in_the_profiler(fusion):
    dx, dy = torch.randn(16, device="neuron"), torch.randn(16, device="neuron")
    warmed(three_ops, dx, dy)
    stats.reset()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        result = three_ops(dx, dy)
        torch.neuron.synchronize()
    [executable] = stats.executables()
    assert executable.calls == 1 and executable.program.launches == 0  # the wrapper notes the launch
    assert "adaptive_eager_forward" in {event.name for event in prof.events()}
    assert torch.equal(result.cpu(), three_ops(dx.cpu(), dy.cpu()))


def test_runs_on_strided_and_broadcast_inputs_give_the_unfused_bits(fusion):
    x, y = torch.randn(6, 4).t(), torch.randn(4, 3)
    dx, dy = x.to("neuron"), y.to("neuron")[:, 1:2]  # transposed; a column of another tensor, broadcast
    y = y[:, 1:2]

    def keeps_one(a, b):
        m = a * b
        return m, ((m + 0.5) * b).relu()

    fused = warmed(keeps_one, dx, dy)
    assert stats.summary()["fused_ops"] == 4 and stats.executables()[0].program.launches == 1, _C.fusion_counters()
    for f, expected in zip(fused, keeps_one(x, y)):
        assert f.stride() == expected.stride() and torch.equal(f.cpu(), expected)


def test_a_wrapper_using_anything_else_keeps_its_python_route():
    namespace = {"reinterpret_tensor": torch.as_strided}
    exec("def call(self, args):\n    return (reinterpret_tensor(args[0], (2,), (2,)),)\n", namespace)
    compiled = types.SimpleNamespace(compiled_fn_runner=type("Runner", (), {"call": namespace["call"]})())
    with pytest.raises(native.NotReadable, match="reinterpret_tensor"):
        native.read_program(compiled, [torch.zeros(4)], python_run=None)


def test_a_cache_hit_compiles_nothing(fusion):
    dx, dy = torch.randn(16, device="neuron"), torch.randn(16, device="neuron")
    warmed(three_ops, dx, dy)
    compiles = _C.fusion_counters()["compiles"]
    for _ in range(5):
        three_ops(dx, dy)
        torch.neuron.synchronize()
    counters = _C.fusion_counters()
    assert counters["compiles"] == compiles and counters["fused_launches"] == 6


def test_a_host_read_ends_the_run(fusion):
    dx, dy = torch.randn(16, device="neuron"), torch.randn(16, device="neuron")

    def read_between(x, y):
        a = three_ops(x, y)
        a.cpu()  # the user inspects a: the run ends at the op producing it
        return three_ops(a, y)

    result = warmed(read_between, dx, dy)
    s = stats.summary()
    assert s["fused_launches"] == 2 and s["ops_per_launch"] == 3
    assert torch.equal(result.cpu(), three_ops(three_ops(dx.cpu(), dy.cpu()), dy.cpu()))


def test_an_op_that_is_not_fusible_ends_the_run(fusion):
    dx, dy = torch.randn(4, 4, device="neuron"), torch.randn(4, 4, device="neuron")

    def around_exp(x, y):  # exp is not fusible (fusible_ops.py: transcendentals); a matmul now joins runs
        return three_ops(three_ops(x, y).exp(), y)

    result = warmed(around_exp, dx, dy)
    s = stats.summary()
    assert s["fused_launches"] == 2 and s["fused_ops"] == 6
    x, y = dx.cpu(), dy.cpu()
    assert torch.equal(result.cpu(), three_ops(three_ops(x, y).exp(), y))


def test_runs_end_at_the_buffer_size_limit(monkeypatch, fusion):
    monkeypatch.setenv("TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT", "4")
    engine.configure(True)
    dx, dy = torch.randn(16, device="neuron"), torch.randn(16, device="neuron")

    def nine_ops(x, y):
        return three_ops(three_ops(three_ops(x, y), y), y)

    warmed(nine_ops, dx, dy)
    s = stats.summary()
    assert s["fused_launches"] == 2 and s["fused_ops"] == 8  # 4 + 4, and the ninth op alone stays unfused
    assert s["unfused_ops_in_runs"] == 1


def test_runs_shorter_than_the_low_threshold_stay_unfused(monkeypatch, fusion):
    monkeypatch.setenv("TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD", "4")
    engine.configure(True)
    dx, dy = torch.randn(16, device="neuron"), torch.randn(16, device="neuron")
    warmed(three_ops, dx, dy)
    s = stats.summary()
    assert s["fused_launches"] == 0 and s["unfused_ops_in_runs"] == 3


def test_deterministic_algorithms_disable_fusion(fusion):
    dx, dy = torch.randn(16, device="neuron"), torch.randn(16, device="neuron")
    torch.use_deterministic_algorithms(True)
    try:
        warmed(three_ops, dx, dy)
    finally:
        torch.use_deterministic_algorithms(False)
    s = stats.summary()
    assert s["fused_launches"] == 0 and s["unfused_ops_in_runs"] == 0


def test_intermediates_still_referenced_are_written(fusion):
    x, y = torch.randn(16), torch.randn(16)
    dx, dy = x.to("neuron"), y.to("neuron")

    def keeps_intermediates(a, b):
        m = a * b
        s = m + 0.5
        return m, s, s.relu()

    m, s, r = warmed(keeps_intermediates, dx, dy)
    assert stats.summary()["fused_ops"] == 3
    em = x * y
    assert torch.equal(m.cpu(), em) and torch.equal(s.cpu(), em + 0.5) and torch.equal(r.cpu(), (em + 0.5).relu())


def test_a_block_freed_and_reused_inside_a_run_is_read_from_its_newest_output(fusion):
    x, y = torch.rand(16), torch.rand(16) + 0.5
    dx, dy = x.to("neuron"), y.to("neuron")

    def rebinding(a, b):
        # Each rebinding frees the previous result while the run is still being issued; the allocator hands
        # its block to a later op of the same run, so one block holds several of the run's outputs in turn.
        for _ in range(3):
            a = a * b
            a = a + 0.25
            a = a - b
            a = a.relu()
        return a

    fused = warmed(rebinding, dx, dy).cpu()
    assert stats.summary()["fused_ops"] == 12
    with engine.switched(False):
        unfused = rebinding(dx, dy).cpu()
    assert torch.equal(fused, unfused) and torch.equal(fused, rebinding(x, y))


def test_a_run_output_in_the_block_of_a_freed_input_gives_the_unfused_bits(fusion):
    x, w = torch.randn(4, 4), torch.randn(4, 4)
    dx, dw = x.to("neuron"), w.to("neuron")

    def frees_its_input(a, m):
        t = a @ m  # not fusible: the run starts after it, with t as its input
        u = t * 2.0
        del t  # t's block is free while the run is issued: a result of the run can take it
        v = u + 1.0
        return (v * u).relu()

    fused = warmed(frees_its_input, dx, dw).cpu()
    assert stats.summary()["fused_launches"] == 1
    with engine.switched(False):
        unfused = frees_its_input(dx, dw).cpu()
    assert torch.equal(fused, unfused) and torch.equal(fused, frees_its_input(x, w))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_16_bit_run_rounds_each_intermediate_as_unfused_eager(fusion, dtype):
    g = torch.Generator().manual_seed(0)
    x, y = (torch.randn(64, generator=g) * 8).to(dtype), (torch.randn(64, generator=g) * 2).to(dtype)
    dx, dy = x.to("neuron"), y.to("neuron")

    def chain(a, b):  # no intermediate is kept: unrounded, they would stay in float32 inside the fused code
        return ((a - b) * b).relu() * b

    fused = warmed(chain, dx, dy).cpu()
    assert stats.summary()["fused_ops"] == 4
    assert torch.equal(fused, chain(x, y))


def test_a_16_bit_call_with_a_0_dim_operand_of_another_dtype_runs_unfused_and_exact(fusion):
    g = torch.Generator().manual_seed(0)
    x, s = (torch.randn(64, generator=g) * 2).to(torch.bfloat16), torch.tensor(0.4567891)  # s: float32, 0-dim
    dx, ds = x.to("neuron"), s.to("neuron")

    def scaled(a, k):  # ATen multiplies by k's float32 value: rounded to bfloat16 first, other bits
        return ((a * k) + a) * k

    result = warmed(scaled, dx, ds).cpu()
    assert stats.summary()["fused_ops"] == 0
    assert torch.equal(result, scaled(x, s))


def test_a_result_only_a_later_segment_of_the_run_reads_is_written(fusion):
    g = torch.Generator().manual_seed(0)
    y = torch.randn(8, 4, generator=g)
    dy = y.to("neuron")

    def split(a, b):
        t = a * b  # not its segment's last op, and nobody refers to t when the run ends ...
        u = b + 1.0
        return u, t.t() * 2.0  # ... but this view of t starts the next segment, which reads t's block

    for _ in range(4):  # new values each time: t's block must not keep the last call's t
        x = torch.randn(8, 4, generator=g)
        got = split(x.to("neuron"), dy)
        torch.neuron.synchronize()
        for r, expected in zip(got, split(x, y)):
            assert torch.equal(r.cpu(), expected)
    assert stats.summary()["fused_launches"] >= 1


def test_a_view_of_a_run_result_splits_the_run(fusion):
    x = torch.randn(16)
    dx = x.to("neuron")

    def through_a_view(a):
        b = (a * 2.0) + 1.0
        return (b[3:9] * 3.0) - 1.0  # a slice of b: not the tensor the run produced

    result = warmed(through_a_view, dx)
    assert stats.summary()["fused_launches"] == 2
    assert torch.equal(result.cpu(), (((x * 2.0) + 1.0)[3:9] * 3.0) - 1.0)


INF, NAN = float("inf"), float("nan")
# Python numbers passed to the ops: signed zeros, infinities, NaN, a float32/bfloat16 denormal, an integer
NUMBERS = (0.0, -0.0, INF, -INF, NAN, 1e-40, 0.5, 3)
# clamp's bounds: equal to a zero of the other sign, infinite, NaN, crossed (min > max), integer
CLAMP_BOUNDS = ((-0.5, 0.5), (0.0, None), (-0.0, None), (None, 0.0), (None, -0.0), (1.0, -1.0), (-INF, INF),
                (2, None), (NAN, None), (None, NAN))
# NaN bit patterns per float dtype: a payload, a negative quiet NaN, a signalling NaN
NAN_BITS = {torch.float32: (0x7FC00001, -0x3FA00000, 0x7FA12345), torch.float16: (0x7E01, -0x1FF, 0x7C01),
            torch.bfloat16: (0x7FC1, -0x3F, 0x7F81)}
BITS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def special_values(dtype) -> torch.Tensor:
    """The values where generated code and ATen's kernels part ways when they do."""
    if dtype == torch.bool:
        return torch.tensor([False, True])
    if dtype.is_complex:
        real = special_values(torch.float32)
        return torch.complex(real, real.flip(0))
    if not dtype.is_floating_point:
        info = torch.iinfo(dtype)
        return torch.tensor(sorted({v for v in (info.min, info.min + 1, -1, 0, 1, 2, info.max)
                                    if info.min <= v <= info.max}), dtype=dtype)
    info = torch.finfo(dtype)
    nans = torch.tensor(NAN_BITS[dtype], dtype=BITS[info.bits // 8]).view(dtype)
    finite = torch.tensor([0.0, -0.0, INF, -INF, info.tiny / 4, -info.tiny / 4, info.tiny, info.max, -info.max,
                           1.0, -1.0, 0.5, 3.0], dtype=dtype)
    return torch.cat([finite, nans])


CALLS = {  # allow-list entry -> the calls that exercise it on (a, b, mask)
    "aten::add.Tensor": lambda a, b, m: [a + b] + [a + n for n in NUMBERS],
    "aten::sub.Tensor": lambda a, b, m: [a - b] + [a - n for n in NUMBERS],
    "aten::mul.Tensor": lambda a, b, m: [a * b] + [a * n for n in NUMBERS],
    "aten::div.Tensor": lambda a, b, m: [a / b] + [a / n for n in NUMBERS],
    "aten::neg": lambda a, b, m: [-a],
    "aten::abs": lambda a, b, m: [a.abs()],
    "aten::relu": lambda a, b, m: [a.relu()],
    "aten::where.self": lambda a, b, m: [torch.where(m, a, b)],
    "aten::clamp": lambda a, b, m: [a.clamp(low, high) for low, high in CLAMP_BOUNDS],
    "aten::rsqrt": lambda a, b, m: [a.rsqrt()],
    "aten::reciprocal": lambda a, b, m: [a.reciprocal()],
    "aten::pow.Tensor_Scalar": lambda a, b, m: [a.pow(2)],
    "aten::eq.Tensor": lambda a, b, m: [a == b],
    "aten::ne.Tensor": lambda a, b, m: [a != b],
    "aten::lt.Tensor": lambda a, b, m: [a < b],
    "aten::gt.Tensor": lambda a, b, m: [a > b],
    "aten::eq.Scalar": lambda a, b, m: [a == n for n in NUMBERS],
    "aten::lt.Scalar": lambda a, b, m: [a < n for n in NUMBERS],
    "aten::gt.Scalar": lambda a, b, m: [a > n for n in NUMBERS],
    "aten::clone": lambda a, b, m: [a.clone()],
}


def accepted(call, dtype) -> bool:
    """Whether ATen takes the call on this dtype at all (neg of bool, ordering of complex... raise)."""
    values = special_values(dtype)
    try:
        call(values, values, torch.ones(values.shape, dtype=torch.bool))
        return True
    except (RuntimeError, TypeError):
        return False


def layouts(dtype):
    """(a, b, mask) with every pair of special values, laid out for each loop of ATen's kernels: contiguous,
    the pairs in the vector loop and 7 of them again in its scalar tail, and every other element (stride 2),
    which ATen runs in its scalar loop only."""
    values = special_values(dtype)
    a, b = values.repeat_interleave(len(values)), values.repeat(len(values))
    mask = torch.arange(a.numel()) % 3 == 0
    contiguous = [torch.cat([t, t[:7]]) for t in (a, b, mask)]
    yield [t.to("neuron") for t in contiguous], contiguous
    strided = [torch.stack([t, t], 1) for t in (a, b, mask)]
    yield [t.to("neuron")[:, 0] for t in strided], [t[:, 0] for t in strided]


def differing(fused, unfused) -> torch.Tensor:
    """Where the bits differ, except that any NaN matches any NaN (fusible_ops.py says why); per element."""
    if fused.is_complex():
        return differing(torch.view_as_real(fused), torch.view_as_real(unfused)).any(-1)
    if fused.dtype == torch.bool:
        return fused != unfused
    bits = BITS[fused.element_size()]
    return (fused.view(bits) != unfused.view(bits)) & ~(fused.isnan() & unfused.isnan())


def test_the_calls_cover_the_allow_list():
    assert set(CALLS) == set(FUSIBLE_OPS), "every allow-list entry needs its calls here"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16, torch.int32, torch.int16, torch.int8,
                                   torch.uint8, torch.bool, torch.complex64])
def test_every_fusible_op_gives_the_unfused_bits_on_every_special_value(fusion, dtype):
    calls = {name: call for name, call in CALLS.items() if accepted(call, dtype)}

    def every_op(a, b, m):  # one program: each call reads the inputs, each result is kept
        return {name: call(a, b, m) for name, call in calls.items()}

    fused_ops = 0
    for (da, db, dm), (a, b, m) in layouts(dtype):
        with engine.switched(False):
            unfused = {name: [t.cpu() for t in results] for name, results in every_op(da, db, dm).items()}
        fused = {name: [t.cpu() for t in results] for name, results in warmed(every_op, da, db, dm).items()}
        fused_ops += stats.summary()["fused_ops"]
        wrong = {}
        for name in calls:
            for k, (f, u) in enumerate(zip(fused[name], unfused[name])):
                if f.dtype != u.dtype:
                    wrong[f"{name} call {k}"] = (u.dtype, f.dtype)
                elif differing(f, u).any():
                    i = differing(f, u).nonzero()[0].item()
                    wrong[f"{name} call {k}"] = (a[i].item(), b[i].item(), u[i].item(), f[i].item())
        assert not wrong, f"{dtype}: fused code differs from ATen (a, b, ATen, fused): {wrong}"
    # the check is not vacuous: what the allow-list admits on this dtype was fused (on bool, few ops are both
    # admitted and give a bool result the next op takes, so its runs are short)
    assert fused_ops >= (0 if dtype.is_complex else 10 if dtype == torch.bool else 40), _C.fusion_counters()


@pytest.mark.parametrize("extreme", [torch.maximum, torch.minimum])
def test_maximum_and_minimum_of_signed_zeros_stay_as_eager_on_every_call(fusion, extreme):
    """ATen answers (+0, -0) with the first operand in its scalar loops and the second in its vector loop:
    no generated code can follow it, so these ops are not fused (fusible_ops.py)."""
    a, b = torch.tensor([0.0]), torch.tensor([-0.0])
    da, db = a.to("neuron"), b.to("neuron")

    def reciprocal_of_extreme(x, y):
        return extreme(x * 1.0, y * 1.0).reciprocal()

    expected = reciprocal_of_extreme(a, b)
    for _ in range(5):  # fused runs compile on their second sighting and run from the third
        assert torch.equal(reciprocal_of_extreme(da, db).cpu(), expected)
    assert expected.item() == float("inf")


def test_a_run_with_an_alpha_other_than_one_runs_unfused_and_exact(fusion):
    x, y = torch.randn(37), torch.randn(37)

    def with_alpha(a, b):
        return torch.sub(a * b, b, alpha=3).relu()

    result = warmed(with_alpha, x.to("neuron"), y.to("neuron"))
    s = stats.summary()
    assert s["fused_launches"] == 0 and s["unfused_ops_in_runs"] == 3
    assert torch.equal(result.cpu(), with_alpha(x, y))


@pytest.fixture
def fresh_executables():
    _C.clear_fused_executables()
    yield
    _C.clear_fused_executables()


def test_a_failing_fused_executable_runs_unfused_and_names_the_ops(monkeypatch, fusion, fresh_executables):
    from localneuron.adaptive_eager import compile as fused_compile

    def broken(description):
        def run(inputs):
            raise RuntimeError("injected failure")
        return run

    monkeypatch.setattr(fused_compile, "compile_run", broken)
    x, y = torch.randn(16), torch.randn(16)
    dx, dy = x.to("neuron"), y.to("neuron")
    for _ in range(4):  # learned, first sighting, compiled and failed, unfused from then on
        result = three_ops(dx, dy)
        torch.neuron.synchronize()
        assert torch.equal(result.cpu(), three_ops(x, y))
    s = stats.summary()
    assert s["failures"] == 1 and s["fused_launches"] == 0 and s["unfused_ops_in_runs"] >= 9
    assert "injected failure" in s["last_failure"]
    assert "aten::mul" in s["last_failure"] and "aten::relu" in s["last_failure"]
    assert "test_adaptive_eager.py:" in s["last_failure"]


def test_the_report_shows_fused_executables_and_estimates(fusion):
    dx, dy = torch.randn(16, device="neuron"), torch.randn(16, device="neuron")
    warmed(three_ops, dx, dy)
    data = report.collect()
    assert data["fused_executables"] == 1 and data["launches_saved"] == 2
    assert 0 < data["estimated_fused_seconds"] < data["estimated_unfused_seconds"]
    text = "\n".join(report.render(data))
    assert "Adaptive Eager: 1 fused executables ran 1 times for 3 ops" in text and "aten::mul" in text


def test_the_variables_are_in_the_environment_table():
    for name, default in (("TORCH_NEURONX_ENABLE_CONCATENATION", "0"),
                          ("TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD", "2"),
                          ("TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT", "64"),
                          ("TORCH_NEURONX_APPLY_SKIP_INTERMEDIATE", "1")):
        assert BY_NAME[name].default == default


def test_a_bad_tuning_value_warns_and_keeps_the_default():
    code = ("import warnings, torch, localneuron\n"
            "from localneuron import _C\n"
            "x = torch.ones(4, device='neuron')\n"
            "for _ in range(4):\n"
            "    y = ((x * 2) + 1).relu()\n"
            "    torch.neuron.synchronize()\n"
            "print('ok', _C.fusion_counters()['fused_launches'])\n")
    result = run_python(code, env={"TORCH_NEURONX_ENABLE_CONCATENATION": "1",
                                   "TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD": "many"}, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD='many' is not valid" in result.stderr
    assert "Using the default 2" in result.stderr
    assert result.stdout.split()[-2:] == ["ok", "2"]  # the third and fourth runs


# Matmuls join runs (TorchNeuron's concatenation engine targets matmul-heavy sequences): a segment is the element-wise
# ops before its matmuls and those matmuls; its element-wise ops run as they would alone (generated code where it
# applies), each matmul with its own kernel, and it is tracked as one operator under its ops' tracked names joined by
# '|' (csrc/fusion/fusion.h, localneuron/ops/tracking.py op_counts).

def relu_of_sum_times(x, w):  # add, relu, mm: one matmul segment
    return torch.relu(x + x) @ w


def native_counts():
    return dict(tracking.op_counts()[tracking.NATIVE])


def tracked_calls(fn, *args, calls=3):
    """Runs fn `calls` times (after a first call, whose ops learn their outputs synchronously) and reads the
    trackers after the host read that ends the last run."""
    fn(*args).cpu()
    tracking.clear_op_tracking()
    stats.reset()
    results = [fn(*args) for _ in range(calls)]
    host = [r.cpu() for r in results]
    return host, native_counts(), tracking.get_executed_ops()


def test_a_matmul_segment_is_one_op_under_its_ops_names_joined(fusion):
    x, w = torch.randn(8, 16), torch.randn(16, 4)
    dx, dw = x.to("neuron"), w.to("neuron")
    host, counts, executed = tracked_calls(relu_of_sum_times, dx, dw)
    joined = "aten::add.Tensor|aten::relu|aten::mm"
    assert counts[joined] == 3
    assert joined in executed
    for op in ("aten::add.Tensor", "aten::relu", "aten::mm"):  # counted inside the fused operator only
        assert op not in executed
    s = stats.summary()
    assert s["matmul_runs"] == 3 and s["matmul_run_ops"] == 9
    # add and relu run as generated code once their signature compiled (its second sighting), mm with its kernel
    assert s["fused_launches"] >= 2 and s["fused_ops"] == 2 * s["fused_launches"]
    with engine.switched(False):
        unfused = relu_of_sum_times(dx, dw).cpu()
    for r in host:
        assert torch.equal(r, unfused)
        assert torch.equal(r, relu_of_sum_times(x, w))


def test_without_fusion_the_same_ops_are_listed_one_by_one():
    with engine.switched(False):
        _, counts, executed = tracked_calls(relu_of_sum_times, torch.randn(8, 16, device="neuron"),
                                            torch.randn(16, 4, device="neuron"))
    assert not any("|" in op for op in executed)
    assert counts["aten::mm"] == 3 and counts["aten::relu"] == 3 and counts["aten::add.Tensor"] == 3


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_a_matmul_segment_gives_the_unfused_bits_on_every_float_dtype(fusion, dtype):
    x, w, b = torch.randn(8, 32, dtype=dtype), torch.randn(4, 32, dtype=dtype), torch.randn(4, dtype=dtype)
    dx, dw, db = x.to("neuron"), w.to("neuron"), b.to("neuron")

    def mlp(x, w, b):  # mul (with a number), linear, bmm through matmul: all in segments with matmuls
        h = torch.nn.functional.linear(x * 0.5, w, b)
        return torch.matmul(h.unsqueeze(0), h.t().unsqueeze(0)) + 1.0

    host, counts, executed = tracked_calls(mlp, dx, dw, db)
    assert any("|" in op and "aten::linear" in op for op in executed), executed
    with engine.switched(False):
        unfused = mlp(dx, dw, db).cpu()
    for r in host:
        assert torch.equal(r, unfused)
        assert torch.equal(r, mlp(x, w, b))


def test_consecutive_matmuls_share_a_segment_and_an_element_wise_op_after_them_starts_the_next(fusion):
    dx, dw = torch.randn(8, 8, device="neuron"), torch.randn(8, 8, device="neuron")

    def chain(x, w):
        return ((x + x) @ w @ w + 1.0) @ w

    host, counts, _ = tracked_calls(chain, dx, dw)
    assert counts["aten::add.Tensor|aten::mm|aten::mm"] == 3 and counts["aten::add.Tensor|aten::mm"] == 3
    x, w = dx.cpu(), dw.cpu()
    assert all(torch.equal(r, chain(x, w)) for r in host)


@pytest.mark.parametrize("read", ["cpu", "item"])
def test_a_host_read_ends_a_matmul_segment(fusion, read):
    dx, dw = torch.randn(8, 8, device="neuron"), torch.randn(8, 8, device="neuron")

    def read_between(x, w):
        a = (x + x) @ w
        a.cpu() if read == "cpu" else a[0, 0].item()  # the user inspects a: the run ends at the op producing it
        return torch.relu(a) @ w

    host, counts, executed = tracked_calls(read_between, dx, dw)
    assert counts["aten::add.Tensor|aten::mm"] == 3 and counts["aten::relu|aten::mm"] == 3
    assert not any(op.count("aten::mm") > 1 for op in executed if "|" in op), executed
    x, w = dx.cpu(), dw.cpu()
    assert all(torch.equal(r, read_between(x, w)) for r in host)


def test_deterministic_algorithms_keep_matmuls_unfused(fusion):
    torch.use_deterministic_algorithms(True)
    try:
        _, _, executed = tracked_calls(relu_of_sum_times, torch.randn(8, 16, device="neuron"),
                                       torch.randn(16, 4, device="neuron"))
    finally:
        torch.use_deterministic_algorithms(False)
    assert not any("|" in op for op in executed) and "aten::mm" in executed
    assert stats.summary()["matmul_runs"] == 0


def test_the_cost_model_still_prices_each_op_of_a_fused_operator(fusion):
    _, counts, _ = tracked_calls(relu_of_sum_times, torch.randn(8, 16, device="neuron"),
                                 torch.randn(16, 4, device="neuron"))
    assert counts["aten::add.Tensor|aten::relu|aten::mm"] == 3
    seconds = tracking.estimated_device_seconds()  # each op's work, by its own name
    assert seconds["aten::mm"] > 0 and seconds["aten::add.Tensor"] > 0 and seconds["aten::relu"] > 0
    data = portability.collect()
    assert data["native_ops"]["aten::add.Tensor|aten::relu|aten::mm"] == 3 and "aten::mm" not in data["native_ops"]
    assert data["estimated_device_seconds_by_op"]["aten::mm"] == seconds["aten::mm"]
    s = stats.summary()
    assert s["matmul_runs"] == 3 and s["matmul_run_ops"] == 9
    assert "3 runs with matmuls ran as one operator each for 9 ops" in "\n".join(report.render(report.collect()))


def test_in_blocking_mode_nothing_is_fused_and_values_match_the_cpu():
    code = ("import torch, localneuron, torch_neuronx\n"
            "x, w = torch.randn(8, 16), torch.randn(16, 4)\n"
            "dx, dw = x.to('neuron'), w.to('neuron')\n"
            "torch_neuronx.clear_op_tracking()\n"
            "r = [(torch.relu(dx + dx) @ dw).cpu() for _ in range(3)]\n"
            "assert all(torch.equal(t, torch.relu(x + x) @ w) for t in r)\n"
            "print('executed', torch_neuronx.get_executed_ops())\n")
    result = run_python(code, env={"TORCH_NEURONX_ENABLE_CONCATENATION": "1", "NEURON_LAUNCH_BLOCKING": "1"},
                        timeout=300)
    assert result.returncode == 0, result.stderr
    executed = result.stdout.split("executed", 1)[1]
    assert "aten::mm" in executed and "|" not in executed


def test_a_traced_matmul_segment_shows_its_fused_element_wise_ops_and_its_matmul(fusion):
    dx, dw = torch.randn(8, 16, device="neuron"), torch.randn(16, 4, device="neuron")
    tracked_calls(relu_of_sum_times, dx, dw)
    stats.reset()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
        relu_of_sum_times(dx, dw).cpu()
    device = {e.name for e in prof.events() if e.device_type != torch.autograd.DeviceType.CPU}
    # the element-wise ops before the matmul run as generated code (compiled on an earlier sighting), the matmul alone
    assert {"adaptive_eager_forward", "aten::mm"} <= device and "aten::add" not in device, device
    assert stats.summary()["matmul_runs"] == 1
