"""What every estimate says about itself: the recipe it assumed, how far the published rows let you
trust it (the calibration error of the nearest kind), where the request leaves the calibrated range;
inference beyond batch 1; the fits verdict of the two paths compared."""
import dataclasses
import json
from pathlib import Path

import pytest

import cli_runner
from localneuron.costmodel import stacks
from localneuron.costmodel.hardware import chip
from localneuron.estimate import architecture, plan, run, trust
from localneuron.estimate.layout import Layout

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "benchmarks" / "configs"
TRN1, TRN2, TRN3 = chip("trn1"), chip("trn2"), chip("trn3")


def small_llama(**extra):
    return architecture.from_config({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4,
                                     "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": 2048,
                                     "vocab_size": 4096, **extra})


def estimate(arch, mode, target=TRN1, nodes=1, tp=1, pp=1, dp=None, **request):
    return run.estimate(arch, target, Layout.make(target, nodes, tp, pp, dp), plan.Request(mode=mode, **request))


def test_the_trust_line_gives_the_error_of_the_nearest_kind_of_published_row():
    kinds = trust.table()
    assert {"trn1 train", "trn1 prefill", "trn1 decode", "trn2 prefill", "trn2 decode"} <= set(kinds)
    e = estimate(small_llama(), "decode", tp=32, input_len=128, output_len=64)
    tuned = kinds["trn1 decode"]["stacks"][stacks.DEFAULT]   # the default prices a tuned recipe
    assert e["stack"]["name"] == stacks.DEFAULT and e["trust"]["stack"] == stacks.DEFAULT
    assert e["trust"]["nearest"] == "trn1 decode" and e["trust"]["rows"] == tuned["rows"]
    assert e["trust"]["mean_abs_error"] == tuned["held_out_mae"]   # the error on configurations never fitted
    assert e["trust"]["calibration"].startswith(
        f"±{100 * tuned['held_out_mae']:.0f}% (mean absolute error on configurations left out of the fit) on "
        f"{tuned['rows']} published trn1 decode rows judged as {stacks.DEFAULT}")
    assert not any("judged as the" in w for w in e["trust"]["warnings"])
    json.dumps(e["trust"])


def test_an_estimate_is_judged_by_the_rows_of_its_own_stack():
    rows = trust.table()["trn1 prefill"]["stacks"]
    assert stacks.DEFAULT not in rows, "a tuned trn1 prefill row joined the set: pick another kind"
    target = dataclasses.replace(TRN1, stack="transformers-neuronx")
    e = estimate(small_llama(), "prefill", target=target, tp=32, input_len=128)
    own = rows["transformers-neuronx"]
    assert e["trust"]["stack"] == "transformers-neuronx" and e["trust"]["rows"] == own["rows"]
    assert e["trust"]["mean_abs_error"] == own["held_out_mae"]
    # the default stack has no trn1 prefill row: the error of every row, and a warning naming whose rows they are
    e = estimate(small_llama(), "prefill", tp=32, input_len=128)
    every = rows[trust.EVERY_ROW]
    assert e["trust"]["rows"] == every["rows"] and e["trust"]["stack"] == ", ".join(every["populations"])
    assert any(w.startswith(f"no published trn1 prefill row was judged as the {stacks.DEFAULT} stack")
               for w in e["trust"]["warnings"])


@pytest.mark.parametrize("target, mode, extra, warning", [
    (TRN3, "decode", {}, "no published trn3 decode row"),
    (TRN1, "train", {"seq": 65536, "global_batch": 32}, "seq 65536 is outside the calibrated"),
    (TRN1, "decode", {"batch": 512}, "batch 512 is outside the calibrated"),
    (TRN1, "prefill", {"input_len": 200000}, "input len 200000 is outside the calibrated"),
])
def test_requests_outside_the_calibrated_range_are_warned(target, mode, extra, warning):
    e = estimate(small_llama(), mode, target=target, tp=32 if mode != "train" else 1, **extra)
    assert any(warning in w for w in e["trust"]["warnings"]), e["trust"]["warnings"]


def test_an_unseen_layout_and_a_mixture_of_experts_are_warned():
    e = estimate(small_llama(), "train", tp=2, global_batch=64, seq=2048)
    assert any(w.startswith("tp 2: no published trn1 train row has this layout") for w in e["trust"]["warnings"])
    moe = small_llama(model_type="mixtral", num_local_experts=4, num_experts_per_tok=2)
    e = estimate(architecture.from_config({"model_type": "mixtral", "hidden_size": 512, "num_hidden_layers": 2,
                                           "num_attention_heads": 8, "num_key_value_heads": 4,
                                           "intermediate_size": 1024, "vocab_size": 4096, "num_local_experts": 4,
                                           "num_experts_per_tok": 2}), "train", global_batch=32, seq=512)
    assert moe.experts.count == 4
    assert any("mixture-of-experts" in w for w in e["trust"]["warnings"])


def test_inference_beyond_batch_1_gives_ttft_tpot_and_throughput():
    arch = small_llama()
    one = estimate(arch, "decode", tp=8, batch=1, input_len=2048, output_len=256)
    eight = estimate(arch, "decode", tp=8, batch=8, input_len=2048, output_len=256)
    assert eight["ttft_s"] > one["ttft_s"] and eight["tpot_s"] >= one["tpot_s"]
    assert eight["tokens_per_s"] == pytest.approx(8 / eight["tpot_s"]) and eight["tokens_per_s"] > one["tokens_per_s"]
    assert eight["prefill_tokens_per_s"] == pytest.approx(8 * 2048 / eight["ttft_s"])
    assert eight["hbm_per_core_bytes"]["kv_cache"] == 8 * one["hbm_per_core_bytes"]["kv_cache"]
    longer = estimate(arch, "decode", tp=8, batch=8, input_len=16384, output_len=256)
    assert longer["tpot_s"] > eight["tpot_s"] and longer["ttft_s"] > 4 * eight["ttft_s"]


def test_a_long_prompt_runs_sequence_parallel_a_short_one_does_not():
    arch = architecture.load(str(CONFIGS / "llama-3-70b.json"))[1]
    short = estimate(arch, "prefill", target=TRN2, tp=64, input_len=128)
    long = estimate(arch, "prefill", target=TRN2, tp=64, input_len=16384)
    # sequence parallel: the norms of a rank run on 1/tp of the tokens, the collectives are ring
    # reduce-scatters and all-gathers whose latency a short prompt does not amortise
    assert long["ttft_s"] < 200 * short["ttft_s"]
    assert "sequence parallel prompts" in long["model"]["recipe"]


def test_weight_only_quantized_weights_are_read_at_their_stored_size():
    arch = small_llama()
    bf16 = estimate(arch, "decode", tp=2, input_len=256, output_len=16)
    int8 = estimate(arch, "decode", tp=2, input_len=256, output_len=16, weights="int8")
    assert int8["hbm_per_core_bytes"]["parameters"] < 0.6 * bf16["hbm_per_core_bytes"]["parameters"]
    assert int8["request"]["weights"] == "int8"


def localneuron(*args):
    """`localneuron ARGS...` through its main() in this process (every call here is an --hf-config run)."""
    return cli_runner.localneuron_in_process(*args, cwd=ROOT)


def test_the_summary_and_json_carry_the_recipe_and_the_trust_line(tmp_path):
    out = tmp_path / "e.json"
    r = localneuron("estimate", "--hf-config", str(CONFIGS / "llama-3-8b.json"), "--target", "trn1", "--tp", "32",
                    "--mode", "decode", "--batch", "4", "--input-len", "1024", "--output-len", "256", "--json", str(out))
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert sum(line.startswith("  recipe assumed: ") for line in lines) == 1
    assert any(line.startswith("  how far to trust it: ±") and "published trn1 decode rows" in line for line in lines)
    data = json.loads(out.read_text())
    assert data["trust"]["nearest"] == "trn1 decode" and data["model"]["recipe"]


def test_the_json_is_written_without_following_a_planted_link(tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "e.json"
    (tmp_path / "e.json.tmp").symlink_to(victim)
    r = localneuron("estimate", "--hf-config", str(CONFIGS / "llama-3-8b.json"), "--target", "trn1", "--tp", "32",
                    "--mode", "prefill", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "keep me" and json.loads(out.read_text())["ttft_s"] > 0


def test_the_fits_verdict_of_the_two_paths_agrees_or_says_which_term_differs():
    pytest.importorskip("transformers")
    from localneuron.estimate.command import _fits_compared

    config = json.loads((CONFIGS / "llama-3.1-70b.json").read_text())
    layout = Layout.make(TRN1, 32, 32, 8, 4)
    request = plan.Request(mode="train", global_batch=1024, seq=2048, recompute="full")
    written = run.estimate_hf(config, TRN1, layout, request)
    recipe = run.estimate(architecture.from_config(config), TRN1, layout, request)
    assert written["fits"] == recipe["fits"] is True
    assert _fits_compared(written, recipe) == "the tuned recipe fits too"
    # a plan only one of them holds: the term that differs most, and why
    tight = dict(written, fits=False)
    said = _fits_compared(tight, recipe)
    assert said.startswith("the tuned recipe fits") and " differ most, " in said
