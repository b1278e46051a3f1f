"""Dispatcher-surface sweep (tests/support/dispatcher_sweep.py) against the checked-in expected status of every
overload (tests/support/expected/dispatcher_status.py): one test per overload, so a regression fails under its
own name, and an expected failure that starts passing fails too.

Default tier: test_fast_op, over dispatcher_sweep.fast_overloads() (a stride through the surface plus
the overloads behind known failure classes). Full sweep: `pytest -m slow tests/sweeps/test_dispatcher_sweep.py`
(test_op, every overload with a CPU kernel; add `-k NAME` to sweep a few). Only the overloads whose
tests are selected are swept.
"""
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import dispatcher_sweep  # noqa: E402
import expected_status  # noqa: E402
import schema_inputs  # noqa: E402
import sweep_pool  # noqa: E402

EXPECTED = expected_status.load(dispatcher_sweep.EXPECTED_FILE)
SWEPT = dispatcher_sweep.swept_overloads()
FAST = dispatcher_sweep.fast_overloads()


@pytest.fixture(scope="module")
def sweep(request):
    selected = sorted({item.callspec.params["op"] for item in request.session.items
                       if item.module.__name__ == __name__ and hasattr(item, "callspec")})
    result = dispatcher_sweep.run_sweep(selected, log=lambda m: print(m, file=sys.stderr))
    print("\n" + dispatcher_sweep.format_counts(result), file=sys.stderr)
    return {r["op"]: r for r in result["records"]}


def _check(sweep, op):
    assert op in EXPECTED, f"{op} has no expected status: python3 tests/support/dispatcher_sweep.py --write-expected"
    r = sweep[op]
    expected_status.check(op, EXPECTED[op], r["status"], r.get("error") or r.get("reason") or "")


@pytest.mark.parametrize("op", FAST)
def test_fast_op(sweep, op):
    _check(sweep, op)


@pytest.mark.slow
@pytest.mark.parametrize("op", SWEPT)
def test_op(sweep, op):
    _check(sweep, op)


def test_expected_table_matches_the_dispatcher():
    stale = sorted(set(EXPECTED) - set(SWEPT))
    missing = sorted(set(SWEPT) - set(EXPECTED))
    assert not stale and not missing, (f"tests/support/expected/dispatcher_status.py is out of date (regenerate it): "
                                       f"not swept overloads {stale[:10]}, overloads without status {missing[:10]}")
    for op, line in EXPECTED.items():
        kind, _, reason = line.partition(": ")
        assert kind in ("pass", "xfail", "skip") and (kind == "pass" or reason.strip()), f"{op}: {line!r}"


def test_fast_tier_names_real_overloads():
    unknown = sorted(set(dispatcher_sweep.FAST_NAMED) - set(SWEPT))
    assert not unknown, f"FAST_NAMED entries that are not swept overloads: {unknown}"


def test_out_variants_get_the_functional_dtypes():
    # max.dim_max writes values and int64 indices: the generated out= tensors must say so, so that the
    # out= overload is swept for every dtype (not only int64).
    import torch

    schema = torch._C._get_schema("aten::max", "dim_max")
    sibling = schema_inputs.functional_sibling(schema, torch._C._jit_get_schemas_for_operator("aten::max"))
    assert sibling.overload_name == "dim"
    args, kwargs = next(schema_inputs.candidate_calls(schema, torch.bfloat16, torch.ops.aten.max.dim))
    assert (kwargs["max"].dtype, kwargs["max_values"].dtype) == (torch.bfloat16, torch.int64)


def test_a_wrong_device_result_fails(monkeypatch):
    # The comparison catches a wrong result: an op whose neuron result is made wrong on purpose fails.
    import torch

    real = dispatcher_sweep.resolve

    def wrong_on_neuron(full):
        op = real(full)
        return lambda *a, **k: op(*a, **k) + (1 if any(getattr(x, "device", None) == torch.device("neuron", 0)
                                                       for x in a) else 0)
    monkeypatch.setattr(dispatcher_sweep, "resolve", wrong_on_neuron)
    record = dispatcher_sweep.run_overload("aten::neg")
    assert record["status"] == "fail" and "mismatch" in str(record["dtypes"]["float32"])


def test_crash_is_isolated_and_recorded(monkeypatch):
    # A worker that dies on an op (a simulated device crash) costs only that op: it is recorded as a
    # crash, confirmed alone, the CPU-only control run survives it (so the device is blamed), and the
    # other ops still run.
    monkeypatch.setenv(sweep_pool.FAULTS_VAR, "crash:aten::neg")
    result = dispatcher_sweep.run_sweep(["aten::abs", "aten::neg", "aten::add.Tensor"], n_workers=1)
    by_op = {r["op"]: r for r in result["records"]}
    assert by_op["aten::neg"]["status"] == "fail" and "also alone" in by_op["aten::neg"]["error"]
    assert by_op["aten::neg"]["control"] == "ok"
    assert by_op["aten::abs"]["status"] == by_op["aten::add.Tensor"]["status"] == "pass"
    assert result["counts"]["crash"] == 1
