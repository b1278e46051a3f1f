"""`localneuron estimate --hf-config` with transformers: the model is the one AutoModelForCausalLM.from_config
builds (any causal LM), traced on fake neuron tensors; tensor parallelism follows the model's own plan."""
import json
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

import torch  # noqa: E402

from localneuron.cli.main import main  # noqa: E402
from localneuron.costmodel.hardware import chip  # noqa: E402
from localneuron.estimate import architecture, hf, plan, run  # noqa: E402
from localneuron.estimate.layout import Layout  # noqa: E402

TRN1 = chip("trn1")
SMALL = {"hidden_size": 256, "num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2,
         "intermediate_size": 512, "vocab_size": 1024, "max_position_embeddings": 512}
CONFIGS = {
    "llama": {"model_type": "llama", **SMALL},
    "qwen2": {"model_type": "qwen2", **SMALL},
    "qwen3": {"model_type": "qwen3", "head_dim": 32, **SMALL},
    "mistral": {"model_type": "mistral", **SMALL},
    "mixtral": {"model_type": "mixtral", "num_local_experts": 4, "num_experts_per_tok": 2, **SMALL},
    "gpt2": {"model_type": "gpt2", "n_embd": 256, "n_layer": 4, "n_head": 8, "vocab_size": 1024, "n_positions": 512},
}
TIMED = {"train": "step_s", "prefill": "ttft_s", "decode": "tpot_s"}


def estimate(config, mode, tp=1, pp=1, dp=None, **request):
    request.setdefault("recompute", "none" if mode == "train" else "selective")
    layout = Layout.make(TRN1, 1, tp, pp, dp)
    return run.estimate_hf(config, TRN1, layout, plan.Request(mode=mode, **request))


def full_parameters(config):
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(hf.hf_config(config))
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("mode", ["train", "prefill", "decode"])
def test_any_causal_lm_is_estimated_from_the_model_transformers_builds(name, mode):
    config = CONFIGS[name]
    e = estimate(config, mode, global_batch=32, seq=128, input_len=64, output_len=32)
    json.dumps(e)
    assert e["model"]["built_with"].startswith("transformers") and e["model"]["model_type"] == name
    assert e["model"]["parameters"] == full_parameters(config)
    assert sum(e["breakdown"].values()) == pytest.approx(e[TIMED[mode]])
    assert e[TIMED[mode]] > 0 and e["breakdown"]["compute"] > 0
    memory = e["hbm_per_core_bytes"]
    assert memory["total"] == sum(v for k, v in memory.items() if k != "total")
    # the traces of one and two layers give the layer and the rest: together, the whole bf16 model
    assert memory["parameters"] == 2 * e["model"]["parameters"]
    assert 0 < e["model"]["rank_layer_parameters"] * e["model"]["layers"] < e["model"]["parameters"]
    if mode == "decode":
        assert memory["kv_cache"] > 0
    if mode == "train":
        assert 0 < e["mfu"] < 1 and memory["optimizer_state"] > 0


@pytest.mark.parametrize("name", ["llama", "qwen3", "mixtral"])
def test_tensor_parallel_shards_follow_the_models_plan(name):
    config = CONFIGS[name]
    whole = estimate(config, "train", dp=1, global_batch=4, seq=128)
    split = estimate(config, "train", tp=4, dp=1, global_batch=4, seq=128)
    assert split["layout"]["tp"] == 4
    # attention, MLP and vocabulary split four ways; kv heads (2 < 4) replicate, norms stay whole
    assert whole["model"]["rank_layer_parameters"] / 4 < split["model"]["rank_layer_parameters"] \
        < whole["model"]["rank_layer_parameters"] / 2
    assert split["breakdown"]["collectives"] > whole["breakdown"]["collectives"] == 0
    assert split["hbm_per_core_bytes"]["parameters"] < whole["hbm_per_core_bytes"]["parameters"] / 2


def test_pipeline_stages_split_the_layers():
    one = estimate(CONFIGS["llama"], "train", global_batch=32, seq=128)
    four = estimate(CONFIGS["llama"], "train", pp=4, global_batch=32, seq=128)
    assert four["breakdown"]["pipeline_bubble"] > 0 and four["micro_batch_stage_s"] < one["micro_batch_stage_s"]
    assert four["hbm_per_core_bytes"]["parameters"] < one["hbm_per_core_bytes"]["parameters"]


def test_transformers_and_the_builder_agree_on_a_llama_decode():
    config = {**CONFIGS["llama"], "hidden_size": 1024, "intermediate_size": 2816, "vocab_size": 8192}
    request = plan.Request(mode="decode", input_len=256, output_len=128)
    layout = Layout.make(TRN1, 1, 4, 1)
    ours = run.estimate(architecture.from_config(config), TRN1, layout, request)
    theirs = run.estimate_hf(config, TRN1, layout, request)
    assert theirs["model"]["parameters"] == ours["model"]["parameters"]
    assert theirs["tpot_s"] == pytest.approx(ours["tpot_s"], rel=0.10)
    assert theirs["hbm_per_core_bytes"]["total"] == pytest.approx(ours["hbm_per_core_bytes"]["total"], rel=0.10)


def test_a_mix_of_layer_kinds_is_traced_per_kind():
    kinds = {**CONFIGS["qwen3"], "use_sliding_window": True, "sliding_window": 64, "max_window_layers": 0}
    full = estimate({**kinds, "layer_types": ["full_attention"] * 4}, "decode", input_len=1024, output_len=64)
    sliding = estimate({**kinds, "layer_types": ["sliding_attention"] * 4}, "decode", input_len=1024, output_len=64)
    mixed = estimate({**kinds, "layer_types": ["full_attention", "sliding_attention"] * 2}, "decode",
                     input_len=1024, output_len=64)
    assert mixed["model"]["parameters"] == full["model"]["parameters"] == full_parameters(kinds)
    # a sliding-window layer attends to 64 tokens, not 1,056: the mix costs between the two
    assert sliding["tpot_s"] < mixed["tpot_s"] < full["tpot_s"]
    assert mixed["tpot_s"] == pytest.approx((sliding["tpot_s"] + full["tpot_s"]) / 2, rel=0.02)


def test_a_model_without_a_tp_plan_or_a_bad_request_is_explained():
    with pytest.raises(architecture.ConfigError, match="no tensor-parallel plan"):
        estimate(CONFIGS["gpt2"], "prefill", tp=2)
    with pytest.raises(architecture.ConfigError, match="layer_types"):
        estimate({**CONFIGS["qwen3"], "layer_types": ["full_attention"]}, "prefill")
    with pytest.raises(architecture.ConfigError, match="--recompute full"):
        estimate(CONFIGS["llama"], "train", recompute="selective", global_batch=32, seq=128)
    with pytest.raises(architecture.ConfigError, match="model_type"):
        estimate({"hidden_size": 8}, "prefill")


def test_the_default_path_needs_no_transformers_and_as_written_says_how_to_get_it(tmp_path, monkeypatch, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CONFIGS["llama"]))
    monkeypatch.setattr(hf, "available", lambda: False)
    assert main(["estimate", "--hf-config", str(path), "--mode", "prefill", "--target", "trn1"]) == 0
    out = capsys.readouterr()
    assert "recipe assumed:" in out.out and out.err == ""
    assert main(["estimate", "--hf-config", str(path), "--mode", "prefill", "--as-written"]) == 2
    assert "pip install 'localneuron[hf]'" in capsys.readouterr().err


def test_fits_is_right_for_70b_models_built_by_transformers():
    root = Path(__file__).resolve().parents[2] / "benchmarks" / "configs"
    llama_31 = json.loads((root / "llama-3.1-70b.json").read_text())
    e = run.estimate_hf(llama_31, TRN1, Layout.make(TRN1, 32, 32, 8, 4),
                        plan.Request(mode="train", global_batch=1024, seq=2048, recompute="full"))
    assert e["fits"], e["hbm_per_core_bytes"]
    llama_3 = json.loads((root / "llama-3-70b.json").read_text())
    e = run.estimate_hf(llama_3, TRN1, Layout.make(TRN1, 1, 1, 1, 1), plan.Request(mode="decode", output_len=16))
    assert not e["fits"] and e["hbm_per_core_bytes"]["parameters"] > 2 * 70e9
