"""The software stack an estimate prices (`--stack`): a named set of physical efficiencies per generation,
fitted on the published rows that ran it (localneuron/costmodel/stacks.py, fitted_table.py). Each efficiency
moves the one term it stands for, the fitted table stays inside its bounds and names real rows of the stack,
an unknown stack is refused with the list, and the device prices its work as the default stack does."""
import dataclasses
import json
import sys
from pathlib import Path

import pytest
import torch

from localneuron.costmodel import engines, fitted_table, stacks
from localneuron.costmodel.hardware import chip
from localneuron.estimate import architecture, plan, run
from localneuron.estimate.layout import Layout, target_chip

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

import calibration  # noqa: E402

TRN1, TRN2 = chip("trn1"), chip("trn2")


def small_llama():
    return architecture.from_config({"model_type": "llama", "hidden_size": 512, "num_hidden_layers": 4,
                                     "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": 2048,
                                     "vocab_size": 4096})


def matmul_seconds(target) -> float:
    a = torch.empty(1024, 1024, dtype=torch.bfloat16, device="meta")
    return engines.op_work(target, "aten::mm", [a, a], [a]).engine_s["tensor"]


def test_each_efficiency_moves_its_own_term_and_only_it():
    table = {"transformers-neuronx": {"trn1": {"matmul": 0.5, "hbm": 0.25, "request_s": 0.02,
                                               "decode_layer_s": 3e-5}}}
    own = dataclasses.replace(TRN1, stack="transformers-neuronx")
    with stacks.refitted({}):
        gemm, transfer = matmul_seconds(own), own.hbm_transfer_s(1 << 20)
        neutral = run.estimate(small_llama(), own, Layout.make(own, 1, 8, 1, 1),
                               plan.Request(mode="decode", input_len=128, output_len=64))
    with stacks.refitted(table):
        assert matmul_seconds(own) == pytest.approx(2 * gemm)         # half the GEMM rate: twice the TensorE time
        assert own.hbm_transfer_s(1 << 20) == pytest.approx(4 * transfer)
        assert own.memory_bytes_per_s_per_core == pytest.approx((1 << 20) / own.hbm_transfer_s(1 << 20))
        assert matmul_seconds(TRN1) == pytest.approx(gemm)            # another stack keeps its own
        slowed = run.estimate(small_llama(), own, Layout.make(own, 1, 8, 1, 1),
                              plan.Request(mode="decode", input_len=128, output_len=64))
    # the serving stack's request cost reaches the first token only, as a launch-side cost; the runtime's per-layer
    # waits reach each decode step only, once per layer (small_llama has 4)
    assert slowed["prefill_breakdown"]["launches"] - neutral["prefill_breakdown"]["launches"] == pytest.approx(0.02)
    assert slowed["tpot_s"] > neutral["tpot_s"]
    assert slowed["breakdown"]["launches"] - neutral["breakdown"]["launches"] == pytest.approx(4 * 3e-5)
    assert slowed["stack"]["efficiencies"] == {"matmul": 0.5, "hbm": 0.25, "request_s": 0.02, "decode_layer_s": 3e-5}


def test_a_stack_without_rows_of_a_generation_borrows_the_nearest_then_the_default():
    table = {stacks.DEFAULT: {"trn1": {"matmul": 0.9, "hbm": 0.8}, "trn2": {"request_s": 0.01}},
             "optimum-neuron": {"trn2": {"matmul": 0.4}}}
    with stacks.refitted(table):
        assert stacks.efficiencies("optimum-neuron", "trn2") == stacks.Efficiencies(0.4, 0.8, 0.01)
        assert stacks.efficiencies("optimum-neuron", "trn1") == stacks.Efficiencies(0.4, 0.8, 0.01)
        assert stacks.efficiencies("optimum-neuron", "trn3") == stacks.Efficiencies(0.4, 0.8, 0.01)
        assert stacks.efficiencies(stacks.DEFAULT, "trn3") == stacks.Efficiencies(0.9, 0.8, 0.01)
        assert stacks.efficiencies("hf-torch-neuronx", "trn1") == stacks.Efficiencies(0.9, 0.8, 0.01)
    with stacks.refitted({}):
        assert stacks.efficiencies("hf-torch-neuronx", "trn2") == stacks.Efficiencies()
    # the context puts the written table back, even when pricing fails inside it
    with pytest.raises(RuntimeError), stacks.refitted({}):
        raise RuntimeError
    assert stacks.values() == tuple(sorted((s, g, p, v) for s, per in fitted_table.EFFICIENCIES.items()
                                           for g, fitted in per.items() for p, v in fitted.items()))


def test_the_fitted_table_is_inside_its_bounds_and_names_rows_of_its_stack():
    rows = {row["id"]: row for row in json.loads(calibration.ROWS.read_text())["rows"]}
    assert set(fitted_table.EFFICIENCIES) <= set(stacks.STACKS)
    for stack, per in fitted_table.EFFICIENCIES.items():
        for generation, values in per.items():
            assert generation in stacks.GENERATIONS and values, (stack, generation)
            fitted_on = fitted_table.ROWS[stack][generation]
            kinds = {rows[i]["kind"] for i in fitted_on}
            for name, value in values.items():
                parameter = stacks.PARAMETERS[name]
                assert parameter.low <= value <= parameter.high, (stack, generation, name, value)
                assert value in calibration.EFFICIENCY_GRIDS[name], (stack, generation, name)
                assert set(parameter.kinds) & kinds, f"{name} fitted on rows ({kinds}) it does not move"
            for row_id in fitted_on:   # the rows are the stack's: their software stands for it
                row = rows[row_id]
                assert stack in stacks.judged_by(calibration.population_of(row), row["kind"]), row_id
                assert calibration._target(row).name == generation, row_id
    for name, grid in calibration.EFFICIENCY_GRIDS.items():
        assert min(grid) == stacks.PARAMETERS[name].low and max(grid) == stacks.PARAMETERS[name].high
        assert stacks.PARAMETERS[name].neutral in grid
    assert set(fitted_table.COLLECTIVES) == set(calibration.COLLECTIVE_GRIDS)


def test_every_row_is_judged_by_a_stack_and_the_tuned_libraries_by_the_default_first():
    tuned = {("nxd", "train"), ("nemo-megatron", "train"), ("nxd-inference", "prefill"), ("nxd-inference", "decode"),
             ("transformers-neuronx", "decode")}
    for row in json.loads(calibration.ROWS.read_text())["rows"]:
        population = calibration.population_of(row)
        if population in calibration.HARDWARE_POPULATIONS or population == "unstated":
            continue
        judged = stacks.judged_by(population, row["kind"])
        assert judged, row["id"]
        assert (judged[0] == stacks.DEFAULT) == ((population, row["kind"]) in tuned), row["id"]


def test_the_device_prices_as_the_default_stack():
    from localneuron.runtime.targets import TARGETS

    assert {target.stack for target in TARGETS.values()} == {stacks.DEFAULT}
    assert target_chip("trn2").stack == stacks.DEFAULT
    assert target_chip("trn2", 1, "optimum-neuron").stack == "optimum-neuron"


def localneuron(*argv) -> int:
    """The command line, in this process (a fresh interpreter per call adds seconds and nothing the CLI tests in
    tests/estimate/test_estimate.py do not already cover)."""
    from localneuron.cli.main import main

    return main(list(argv))


def test_an_unknown_stack_is_refused_with_the_list(capsys):
    with pytest.raises(ValueError, match="unknown --stack 'nxd'; choose one of: torchneuron \\(default\\), "):
        target_chip("trn2", None, "nxd")
    status = localneuron("estimate", "--hf-config", str(ROOT / "benchmarks" / "configs" / "llama-3-8b.json"),
                         "--mode", "decode", "--tp", "4", "--stack", "vllm")
    said = capsys.readouterr().err
    assert status == 2 and "unknown --stack 'vllm'" in said
    assert all(name in said for name in stacks.STACKS)


def test_the_stack_named_is_the_stack_priced_and_printed(tmp_path, capsys):
    expected = stacks.efficiencies("transformers-neuronx", "trn1")
    assert expected != stacks.efficiencies(stacks.DEFAULT, "trn1"), "pick a stack whose efficiencies differ"
    out = tmp_path / "e.json"
    command = ["estimate", "--hf-config", str(ROOT / "benchmarks" / "configs" / "llama-3-8b.json"), "--mode",
               "prefill", "--tp", "32", "--target", "trn1", "--input-len", "2048", "--json", str(out)]
    assert localneuron(*command) == 0
    assert f"stack priced: {stacks.DEFAULT} (" in capsys.readouterr().out
    first = json.loads(out.read_text())
    assert localneuron(*command, "--stack", "transformers-neuronx") == 0
    assert "stack priced: transformers-neuronx (" in capsys.readouterr().out
    second = json.loads(out.read_text())
    assert second["stack"]["name"] == "transformers-neuronx"
    assert second["stack"]["efficiencies"] == dataclasses.asdict(expected)
    assert second["ttft_s"] != first["ttft_s"]


def test_the_estimate_page_names_every_stack_and_bound_the_code_has():
    page = (ROOT / "docs" / "estimate.md").read_text()
    section = page[page.index("## The software stack: `--stack`"):page.index("## Three ways to name the model")]
    named = {line.split("|")[1].strip().split()[0].strip("`") for line in section.splitlines()
             if line.startswith("| `") and "stands for" not in line}
    assert named == set(stacks.STACKS) | set(stacks.PARAMETERS)
    for name, parameter in stacks.PARAMETERS.items():
        assert f"| `{name}` | {parameter.low:g}-{parameter.high:g}" in section, name
    assert f"| `{stacks.DEFAULT}` (default) |" in section


def test_the_option_help_names_every_stack(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")   # no line breaks inside the names
    with pytest.raises(SystemExit) as stopped:
        localneuron("estimate", "--help")
    text = " ".join(capsys.readouterr().out.split())
    assert stopped.value.code == 0 and all(name in text for name in stacks.STACKS)
    assert f"{stacks.DEFAULT} (the default" in text


def test_a_stack_compiled_for_one_length_pads_every_prompt_and_step_to_it():
    # optimum-neuron compiles its serving graphs for one sequence length (no buckets): the prompt's own length
    # no longer matters, the compiled length does; a stack with buckets (the default) pads only to the smallest bucket
    # that holds the prompt (prompt_tokens(), below)
    assert stacks.STACKS["optimum-neuron"].pads_to_compiled_length
    assert not stacks.STACKS[stacks.DEFAULT].pads_to_compiled_length
    assert stacks.compiled_tokens("optimum-neuron", 100, 512) == 512
    assert stacks.compiled_tokens("optimum-neuron", 100, None) == 100
    assert stacks.compiled_tokens(stacks.DEFAULT, 100, 512) == 100
    padded = dataclasses.replace(TRN2, stack="optimum-neuron")

    def answer(target, **request):
        return run.estimate(small_llama(), target, Layout.make(target, 1, 4, 1, 1),
                            plan.Request(mode="decode", output_len=64, **request))
    short, long = answer(padded, input_len=100, compiled_seq=512), answer(padded, input_len=300, compiled_seq=512)
    assert short["ttft_s"] == pytest.approx(long["ttft_s"]) and short["tpot_s"] == pytest.approx(long["tpot_s"])
    as_compiled = answer(padded, input_len=512 - 32)   # the mean decode step's context: input + output / 2
    assert short["tpot_s"] == pytest.approx(as_compiled["tpot_s"])
    assert short["ttft_s"] > answer(padded, input_len=100)["ttft_s"]
    assert short["request"]["compiled_seq"] == 512 and "compiled_seq" not in answer(padded, input_len=100)["request"]
    tuned = dataclasses.replace(TRN2, stack=stacks.DEFAULT)
    # the default stack pads the prompt only to its smallest context bucket that holds it (128 of 128, 256, 512)
    assert answer(tuned, input_len=100, compiled_seq=512)["ttft_s"] == pytest.approx(answer(tuned, input_len=128)["ttft_s"])


def test_a_compiled_length_must_hold_the_request():
    with pytest.raises(plan.RequestError, match="does not hold"):
        plan.Request(mode="decode", input_len=500, output_len=64, compiled_seq=512)
    with pytest.raises(plan.RequestError, match="does not hold"):
        plan.Request(mode="prefill", input_len=600, compiled_seq=512)
    with pytest.raises(plan.RequestError, match="--mode prefill or decode"):
        plan.Request(mode="train", compiled_seq=512)
    assert plan.Request(mode="prefill", input_len=512, output_len=4096, compiled_seq=512).compiled_seq == 512


def small_moe(experts: int):
    return architecture.from_config({"model_type": "qwen3_moe", "hidden_size": 512, "num_hidden_layers": 2,
                                     "num_attention_heads": 8, "num_key_value_heads": 4, "intermediate_size": 1024,
                                     "moe_intermediate_size": 256, "num_experts": experts, "num_experts_per_tok": 2,
                                     "vocab_size": 4096})


def estimate_with_stack(monkeypatch, target, model, request, **stack_changes) -> dict:
    """run.estimate of model on one core of target, with the given fields of target's stack changed (none: as it is)."""
    with monkeypatch.context() as m:
        if stack_changes:
            changed = dataclasses.replace(stacks.STACKS[target.stack], **stack_changes)
            m.setattr(stacks, "STACKS", {**stacks.STACKS, target.stack: changed})
        return run.estimate(model, target, Layout.make(target, 1, 1, 1, 1), request)


def test_a_stack_that_encodes_moe_prompts_block_by_block_runs_every_block_whole(monkeypatch):
    # NxD's dropless context encoding (optimum-neuron's MoE layers): the routed tokens are laid out in blocks of
    # 512 rows, one expert's to a block, as many as the worst routing needs, ceil((T k - (E - 1)) / 512) + E - 1,
    # and every block runs whole; fewer routed tokens than one block run otherwise; the default stack groups
    # the tokens routed to each expert
    assert stacks.moe_prefill_blocks("optimum-neuron", 4096, 128, 8) == (191, 512)
    assert stacks.moe_prefill_blocks("optimum-neuron", 4096, 16, 1) == (23, 512)
    assert stacks.moe_prefill_blocks("optimum-neuron", 32, 128, 8) is None
    assert stacks.moe_prefill_blocks(stacks.DEFAULT, 4096, 128, 8) is None
    target = dataclasses.replace(TRN2, stack="optimum-neuron")

    def compute(experts, block_by_block=True, mode="prefill"):
        e = estimate_with_stack(monkeypatch, target, small_moe(experts),
                                plan.Request(mode=mode, input_len=1024, output_len=4),
                                **({} if block_by_block else {"moe_prefill_block": None}))
        return e["breakdown"]["compute"] if mode == "prefill" else e["tpot_s"]

    # 2048 routed rows: 8 experts take 4 + 7 blocks, 64 experts 4 + 63 (the same tokens, 6x the expert GEMMs' rows)
    for experts in (8, 64):
        assert compute(experts) > compute(experts, block_by_block=False)
    assert compute(64) - compute(64, block_by_block=False) > 4 * (compute(8) - compute(8, block_by_block=False))
    # the decode step is not encoded block by block
    assert compute(64, mode="decode") == compute(64, block_by_block=False, mode="decode")


def test_a_stack_that_materialises_prompt_scores_pays_for_them_quadratically(monkeypatch):
    # Transformers NeuronX 0.10 encodes a prompt with no fused attention kernel: the whole score matrix, a mask, a
    # softmax and the weighted values, each an op of its graph (llama/hlo.py, layers/attention*.py); its decode
    # steps and the default stack keep the fused kernel
    assert stacks.STACKS["transformers-neuronx"].materialises_prompt_scores
    assert not stacks.STACKS[stacks.DEFAULT].materialises_prompt_scores
    target = dataclasses.replace(TRN1, stack="transformers-neuronx")

    def priced(tokens, materialised=True, mode="prefill"):
        e = estimate_with_stack(monkeypatch, target, small_llama(),
                                plan.Request(mode=mode, input_len=tokens, output_len=4),
                                **({} if materialised else {"materialises_prompt_scores": False}))
        return e["breakdown"]["compute"] if mode == "prefill" else e["tpot_s"]

    extra = {t: priced(t) - priced(t, materialised=False) for t in (1024, 2048)}
    assert extra[1024] > 0
    # the scores grow with the square of the prompt, the rest of the layer linearly
    assert extra[2048] > 3 * extra[1024]
    assert priced(1024, mode="decode") == priced(1024, materialised=False, mode="decode")


def test_context_encoding_buckets_pad_a_prompt_to_the_smallest_that_holds_it():
    """NxD Inference's default buckets (generate_buckets(128, max_context_length)) and Transformers NeuronX's
    (half of each n_positions token bucket): a prompt is encoded at the smallest bucket that holds it."""
    assert stacks.context_buckets("nxd-inference", 12288) == [128, 256, 512, 1024, 2048, 4096, 8192, 12288]
    assert stacks.context_buckets("nxd-inference", 12800) == [128, 256, 512, 1024, 2048, 4096, 8192, 12800]
    assert stacks.context_buckets("nxd-inference", 6000) == [128, 256, 512, 1024, 2048, 4096, 6000]
    assert stacks.context_buckets("nxd-inference", 128) == [128]
    assert stacks.context_buckets("transformers-neuronx", 4096) == [64, 128, 256, 512, 1024, 2048]
    assert stacks.prompt_tokens(stacks.DEFAULT, 10000, 12800) == 12800
    assert stacks.prompt_tokens(stacks.DEFAULT, 10000, 12288) == 12288
    assert stacks.prompt_tokens(stacks.DEFAULT, 8000, 12288) == 8192
    assert stacks.prompt_tokens(stacks.DEFAULT, 128, 6400) == 128
    assert stacks.prompt_tokens(stacks.DEFAULT, 129, 6400) == 256
    assert stacks.prompt_tokens(stacks.DEFAULT, 10000, None) == 10000   # no compiled length: as it comes
    assert stacks.prompt_tokens("transformers-neuronx", 1500, 4096) == 2048
    assert stacks.prompt_tokens("optimum-neuron", 100, 512) == 512   # one compiled length: padded to it
