"""The calibration claims cannot rot: every published row of benchmarks/published-trainium-rows.json is
estimated again (no timing: the estimates are computed, not measured) and compared with what
localneuron/estimate/calibration.json and docs/calibration.md say (the trust line every estimate
prints comes from there). The issue's targets (at most 10% per kind on the default stack's rows, 20% over every
row, no kind biased by more than 5%) are asserted as what they are: not met yet on every kind (docs/calibration.md
says where)."""
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibration  # noqa: E402

from localneuron.costmodel import fitted_table, stacks  # noqa: E402
from localneuron.estimate import trust  # noqa: E402


@pytest.fixture(scope="module")
def evaluated():
    return calibration.evaluate()


def test_the_trust_table_is_what_the_published_rows_give_now(evaluated):
    cases, table = evaluated
    claimed = trust.table()
    recomputed = calibration.coverage(cases, table, calibration.population_scores(cases, {}))
    assert set(claimed) == set(recomputed)
    for kind, rows in recomputed.items():
        assert claimed[kind]["rows"] == rows["rows"], kind
        assert claimed[kind]["mae"] == pytest.approx(rows["mae"], abs=0.005), kind
        assert claimed[kind]["worst"] == pytest.approx(rows["worst"], abs=0.005), kind
        assert set(claimed[kind]["stacks"]) == set(rows["stacks"]), kind
        for stack, population in rows["stacks"].items():   # what the trust line quotes, stack by stack
            for name in ("rows", "mae", "bias", "worst"):
                assert claimed[kind]["stacks"][stack][name] == pytest.approx(population[name], abs=0.005), (kind, stack)
            # held out needs the cross-validation (minutes): present, and an error, not recomputed here
            assert 0 <= claimed[kind]["stacks"][stack]["held_out_mae"] < 10, (kind, stack)


def test_every_row_ran_named_software_and_the_default_stack_stands_for_aws_tuned_libraries():
    rows = json.loads(calibration.ROWS.read_text())["rows"]
    ran = {row["id"]: calibration.population_of(row) for row in rows}
    assert set(ran.values()) <= set(calibration.POPULATIONS)
    # the rows whose source names the library: its column, not a guess
    assert all(ran[r["id"]] == "transformers-neuronx" for r in rows if "Transformers NeuronX" in r["quote"])
    assert {ran[r["id"]] for r in rows if r["source"].get("repo") == "huggingface/optimum-neuron"} == {"optimum-neuron"}
    default = {population for population, _ in stacks.STACKS[stacks.DEFAULT].stands_for}
    assert default == {"nxd", "nemo-megatron", "nxd-inference", "transformers-neuronx"}
    assert not stacks.STACKS["optimum-neuron"].tuned and not stacks.STACKS["megatron-lm-reference"].tuned
    with pytest.raises(ValueError, match="no stack recognised"):
        calibration.population_of({"id": "X1", "kind": "decode", "extra": {}, "quote": "", "source": {"repo": "a/b"}})


def test_a_parameter_is_fitted_only_where_the_configurations_support_it(evaluated):
    cases, _ = evaluated
    for (stack, generation), (parameters, members) in calibration.efficiency_groups(cases).items():
        configurations = len({calibration._group(c) for c in members})
        assert len(parameters) <= configurations // calibration.CONFIGURATIONS_PER_PARAMETER, (stack, generation)
        for kind in {c.kind for c in members}:   # at most three free parameters per generation and kind
            assert len([p for p in parameters if kind in stacks.PARAMETERS[p].kinds]) <= 3, (stack, generation, kind)
    # one configuration (two releases of it) fits nothing: the stack falls back to the default's efficiencies
    groups = calibration.efficiency_groups(cases)
    assert groups[("megatron-lm-reference", "trn1")][0] == []
    assert "megatron-lm-reference" not in fitted_table.EFFICIENCIES


def test_the_calibration_page_states_the_errors_the_model_has(evaluated):
    cases, table = evaluated
    page = (ROOT / "docs" / "calibration.md").read_text()
    for (hardware, kind), s in table.items():
        line = (f"| {hardware} | {calibration.KIND_NAMES[kind]} | {s['rows']} | {100 * s['mae']:.1f}% | "
                f"{s['worst_row']} ({100 * s['worst']:.1f}%) |")
        assert line in page, f"docs/calibration.md is stale: regenerate it (python3 benchmarks/calibration.py); {line}"


def test_every_row_is_scored_or_left_out_with_a_reason(evaluated):
    cases, _ = evaluated
    rows = json.loads(calibration.ROWS.read_text())["rows"]
    assert {c.row["id"] for c in cases} == {r["id"] for r in rows}
    for case in cases:
        assert case.estimate is not None and case.estimate > 0, case.row["id"]
        assert case.scored or len(case.excluded) > 20, case.row["id"]


def _target_misses(cases) -> list:
    """The issue's targets (calibration.TARGETS) on the errors in sample (held out needs the cross-validation,
    minutes; docs/calibration.md states them held out): per model kind, the default stack's rows and every row,
    and every row's bias."""
    populations = calibration.population_scores(cases, {})
    misses = []
    for (hardware, kind, stack), p in populations.items():
        if kind not in calibration.METRIC:
            continue
        if stack == stacks.DEFAULT and p["mae"] > calibration.TARGETS["default stack"]:
            misses.append(f"{hardware} {kind} {stack}: {100 * p['mae']:.1f}%")
        if stack == trust.EVERY_ROW and p["mae"] > calibration.TARGETS["every row"]:
            misses.append(f"{hardware} {kind} every row: {100 * p['mae']:.1f}%")
        if stack == trust.EVERY_ROW and abs(p["bias"]) > calibration.TARGETS["bias"]:
            misses.append(f"{hardware} {kind} bias: {100 * p['bias']:+.1f}%")
    return misses


@pytest.mark.xfail(strict=True, reason="the issue's calibration targets are not met on every kind yet: "
                                       "docs/calibration.md's targets table says where")
def test_the_calibration_targets(evaluated):
    cases, _ = evaluated
    assert not _target_misses(cases)


def test_the_kinds_that_meet_the_targets_keep_meeting_them(evaluated):
    # the default stack's kinds within the target when this test was written must stay within it
    cases, table = evaluated
    populations = calibration.population_scores(cases, {})
    for kind in (("trn1", "decode"), ("trn1", "train")):
        assert populations[(*kind, stacks.DEFAULT)]["mae"] <= calibration.TARGETS["default stack"], kind
    assert table[("trn1", "kernel")]["mae"] <= calibration.TARGETS["default stack"]


def _case(row_id: str, stack: str | None = None) -> "calibration.Case":
    row = next(r for r in json.loads(calibration.ROWS.read_text())["rows"] if r["id"] == row_id)
    population = calibration.population_of(row)
    case = calibration.model_case(row, stack or (stacks.judged_by(population, row["kind"]) or [stacks.DEFAULT])[0])
    calibration.price([case])
    return case


@pytest.mark.parametrize("row_id, figure", [("R066", "ttft_s"), ("R065", "tpot_s"), ("R057", "step_s")])
def test_explain_splits_a_rows_estimate_into_parts_that_add_up_to_it(row_id, figure):
    # --explain: the decomposition the worst rows are read with (issue 33); its parts are the schedule's own
    case = _case(row_id)
    assert calibration.BREAKDOWN_OF[case.kind] == figure
    assert sum(calibration.terms(case).values()) == pytest.approx(case.prepared.metric(figure), rel=1e-9)
    lines = calibration.explain(case)
    assert lines[0].startswith(f"{row_id} trn1 {case.kind} as {case.stack}: ")
    assert f"({100 * case.error:+.1f}%)" in lines[0]
    kind = {"ttft_s": "prefill", "tpot_s": "decode", "step_s": "train"}[figure]
    layers = [line for line in lines if line.startswith(f"  {kind}: ") and "layer(s)" in line]
    assert layers and all(not line.startswith(("  prefill: ", "  decode: ", "  train: ")) or
                          line.startswith(f"  {kind}: ") for line in lines)
    assert sum(int(line.split()[1]) for line in layers) == case.prepared.parts()[kind].layers


def test_explain_lists_a_layers_ops_by_engine_time_largest_first():
    case = _case("R078")   # Transformers NeuronX's prompt: the scores taken whole, masked and softmaxed as ops of their own
    lines = calibration.explain(case, top=4)
    ops = [line for line in lines if line.endswith("GFLOP")]
    assert len(ops) == 4
    times = [float(line.split()[0]) for line in ops]
    assert times == sorted(times, reverse=True)
    assert any("aten::_softmax [Rows] (1, 2, 8192, 8192)" in line for line in ops)
