"""OpInfo compare-to-CPU sweep over PyTorch's own op_db (float32 and bfloat16, a few samples per op).

Requirement: at least 97% of the ops that run on CPU match on `neuron` (match = native or fallback).
Every failure counts against the rate, the expected ones included. Each op also has its own test
against its checked-in expected status (tests/support/expected/opinfo_status.py). The engine and the per-op
table are in tests/support/opinfo_sweep.py (`python tests/support/opinfo_sweep.py` prints the whole table).
"""
import os
import sys
from types import SimpleNamespace

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import expected_status  # noqa: E402
import opinfo_sweep  # noqa: E402
import sweep_pool  # noqa: E402

MIN_MATCH_PCT = 97.0
# Expected status per OpInfo: pass, or xfail / skip with the reason (tests/support/expected_status.py).
EXPECTED = expected_status.load(opinfo_sweep.EXPECTED_FILE)


@pytest.fixture(scope="module")
def sweep():
    return opinfo_sweep.run_sweep(n_workers=2, log=lambda m: print(m, file=sys.stderr))


def _failures(result):
    return [r for r in result["records"] if r["status"] == "fail"]


def test_opinfo_match_rate(sweep, capsys):
    # Every failure counts against the rate, the expected ones included.
    s = opinfo_sweep.summarize(sweep)
    failures = _failures(sweep)
    expected = [r for r in failures if EXPECTED.get(r["op"], "").startswith("xfail")]
    lines = ["", "OpInfo compare-to-CPU sweep: failures"]
    for r in failures:
        tag = "expected" if r in expected else "UNEXPECTED"
        lines.append(f"  {r['op']:<28} {tag:<10} {r['error']}")
    for name, why in sweep["skipped"].items():
        lines.append(f"  {name:<28} skipped    {why}")
    lines.append(opinfo_sweep.format_table(sweep, per_op=False))
    if s["ran_on_cpu"]:
        lines.append(f"(for information: {100.0 * (s['ran_on_cpu'] - len(failures) + len(expected)) / s['ran_on_cpu']:.2f}% "
                     f"counting the {len(expected)} expected failures as matches)")
    with capsys.disabled():
        print("\n".join(lines))

    assert s["ran_on_cpu"] >= 600, f"only {s['ran_on_cpu']} ops ran on CPU: is op_db being swept?"
    assert s["match_pct"] >= MIN_MATCH_PCT, (
        f"{s['match_pct']:.2f}% of {s['ran_on_cpu']} ops match (< {MIN_MATCH_PCT}%); failing: "
        + "; ".join(f"{r['op']}: {r['error']}" for r in failures))


@pytest.mark.parametrize("op", sorted(EXPECTED))
def test_opinfo_op(sweep, op):
    records = {r["op"]: r for r in sweep["records"]}
    records.update({n: {"op": n, "status": "skipped", "error": why} for n, why in sweep["skipped"].items()})
    assert op in records, f"{op} is no longer in op_db: regenerate with python3 tests/support/opinfo_sweep.py --write-expected"
    r = records[op]
    expected_status.check(op, EXPECTED[op], opinfo_sweep.pass_fail_skip(r), r.get("error") or "")


def test_every_opinfo_has_an_expected_status(sweep):
    missing = sorted({r["op"] for r in sweep["records"]} - set(EXPECTED))
    assert not missing, f"OpInfos without an expected status (python3 tests/support/opinfo_sweep.py --write-expected): {missing}"


def test_skip_table_is_small_and_reasoned():
    assert len(opinfo_sweep.SKIPS) <= 10
    assert all(reason.strip() for reason in opinfo_sweep.SKIPS.values())


def test_comparison_is_strict():
    # The comparison the sweep relies on catches small float32 errors, wrong dtypes and shapes, outputs
    # left on the CPU, and inaccurate bfloat16 results that the float32-reference rule must not excuse.
    import torch

    add = SimpleNamespace(name="add")
    x = torch.randn(64)
    opinfo_sweep._compare(add, "float32", x, x.clone().to("neuron"), random_op=False)
    for bad in (x + 1e-3, x[:-1], x.double()):
        with pytest.raises(AssertionError):
            opinfo_sweep._compare(add, "float32", x, bad.to("neuron"), random_op=False)
    with pytest.raises(AssertionError):  # an output on the CPU instead of neuron
        opinfo_sweep._compare(add, "float32", x, x.clone(), random_op=False)
    ref = torch.randn(64) * 4
    cpu = ref.bfloat16()
    wrong = (ref + 0.25).bfloat16().to("neuron")
    with pytest.raises(AssertionError):
        opinfo_sweep._compare(add, "bfloat16", cpu, wrong, False, ref_out=ref)
    assert opinfo_sweep._compare(add, "bfloat16", cpu, cpu.to("neuron"), False, ref_out=ref) == []


def test_crash_is_isolated_and_recorded(monkeypatch):
    # A worker that dies on an op (here a forced segfault) costs only that op: it is recorded as a
    # crash, confirmed alone in a fresh process, and the other ops still run.
    monkeypatch.setenv(sweep_pool.FAULTS_VAR, "crash:neg")
    result = opinfo_sweep.run_sweep(["abs", "neg", "add"], n_workers=1)
    by_op = {r["op"]: r for r in result["records"]}
    assert by_op["neg"]["status"] == "fail"
    assert "crash" in by_op["neg"]["error"] and "also alone" in by_op["neg"]["error"]
    assert by_op["abs"]["status"] == by_op["add"]["status"] == "native"
