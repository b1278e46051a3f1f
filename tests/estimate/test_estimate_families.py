"""`localneuron estimate --hf-config` on the default path (the model as a tuned recipe runs it) for every
model family the published Trainium rows have: mixture-of-experts (Qwen3-MoE, Llama-4 with alternating
dense and MoE layers), GPT-3 with tensor parallelism, encoders (BERT, ViT); families it cannot build
are refused with the reason, and sizes beyond any run end in a clear error, never a traceback."""
import json
from pathlib import Path

import pytest

import cli_runner
from localneuron.costmodel.hardware import chip
from localneuron.estimate import architecture, plan, run
from localneuron.estimate.layout import Layout

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "benchmarks" / "configs"
TRN1, TRN2 = chip("trn1"), chip("trn2")


def config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def small(name: str, **changes) -> dict:
    """A published config shrunk (layers, widths, experts) keeping its structure."""
    c = config(name)
    text = c.get("text_config", c)
    for field, value in {"num_hidden_layers": 4, "n_layer": 4, "hidden_size": 256, "n_embd": 256,
                         "intermediate_size": 512, "intermediate_size_mlp": 1024, "n_inner": 1024,
                         "moe_intermediate_size": 128, "num_attention_heads": 8, "n_head": 8,
                         "num_key_value_heads": 4, "head_dim": 32, "vocab_size": 4096, "num_local_experts": 8,
                         "num_experts": 8, "pad_token_id": 4000}.items():
        if field in text:
            text[field] = value
    text.update(changes)
    return c


def estimate(cfg: dict, mode: str, target=TRN1, nodes=1, tp=1, pp=1, dp=None, **request) -> dict:
    arch = architecture.from_config(cfg)
    return run.estimate(arch, target, Layout.make(target, nodes, tp, pp, dp), plan.Request(mode=mode, **request))


def localneuron(*args):
    """`localneuron ARGS...` through its main() in this process (every call here is an --hf-config run)."""
    return cli_runner.localneuron_in_process(*args, cwd=ROOT)


@pytest.mark.parametrize("mode", ["train", "prefill", "decode"])
def test_qwen3_moe_routes_tokens_to_their_experts(mode):
    cfg = small("qwen3-30b-a3b")
    arch = architecture.from_config(cfg)
    assert arch.experts.count == 8 and arch.experts.per_token == 8 and len(arch.moe_layers) == 4
    e = estimate(cfg, mode, tp=4, global_batch=64, seq=256, input_len=128, output_len=32, batch=2)
    assert e["model"]["experts"] == 8 and e["model"]["active_parameters"] <= e["model"]["parameters"]
    timed = {"train": "step_s", "prefill": "ttft_s", "decode": "tpot_s"}[mode]
    assert e[timed] > 0 and sum(e["breakdown"].values()) == pytest.approx(e[timed])


def test_moe_decode_reads_only_the_experts_its_tokens_use():
    # one token routed to 1 of 64 experts reads 1/64 of the expert weights; 64 tokens read them all
    cfg = small("llama-4-scout-17b-16e", num_local_experts=64)
    one = estimate(cfg, "decode", batch=1, input_len=64, output_len=2)
    many = estimate(cfg, "decode", batch=64, input_len=64, output_len=2)
    dense = estimate(small("llama-4-scout-17b-16e", num_local_experts=1), "decode", batch=1, input_len=64,
                     output_len=2)
    assert one["tpot_s"] == pytest.approx(dense["tpot_s"], rel=0.25)
    assert many["breakdown"]["memory"] + many["breakdown"]["compute"] > 4 * (one["breakdown"]["memory"] +
                                                                           one["breakdown"]["compute"])


def test_llama4_alternating_dense_and_moe_layers_are_priced_layer_by_layer():
    maverick = architecture.from_config(small("llama-4-maverick-17b-128e"))
    assert maverick.moe_layers == (1, 3) and maverick.kinds == {"dense": 2, "moe": 2}
    scout = architecture.from_config(small("llama-4-scout-17b-16e"))
    assert scout.kinds == {"moe": 4}
    # the published shapes: 400B parameters, 17B active; 109B for Scout
    full = architecture.from_config(config("llama-4-maverick-17b-128e"))
    assert 390e9 < full.parameters < 410e9 and 16e9 < full.active_parameters < 18.5e9
    assert 105e9 < architecture.from_config(config("llama-4-scout-17b-16e")).parameters < 112e9
    mixed = estimate(small("llama-4-maverick-17b-128e"), "decode", batch=4, input_len=64, output_len=8)
    all_moe = estimate(small("llama-4-maverick-17b-128e", interleave_moe_layer_step=1), "decode", batch=4,
                       input_len=64, output_len=8)
    assert mixed["hbm_per_core_bytes"]["parameters"] != all_moe["hbm_per_core_bytes"]["parameters"]


def test_gpt3_with_tensor_and_pipeline_parallelism_on_the_default_path():
    e = estimate(small("gpt3-46b"), "train", nodes=1, tp=8, pp=2, global_batch=64, seq=512)
    assert e["layout"]["tp"] == 8 and e["breakdown"]["collectives"] > 0 and e["breakdown"]["pipeline_bubble"] > 0
    assert 0 < e["mfu"] < 1


@pytest.mark.parametrize("name", ["bert-large", "vit-base"])
def test_encoders_train_and_run_a_forward(name):
    e = estimate(small(name), "train", dp=8, global_batch=64, micro_batch=8, seq=128)
    assert e["seq_per_s"] > 0 and e["hbm_per_core_bytes"]["optimizer_state"] > 0
    assert estimate(small(name), "prefill", input_len=128)["ttft_s"] > 0
    with pytest.raises(plan.RequestError, match="encoder"):
        estimate(small(name), "decode", input_len=64, output_len=8)


def test_vit_prices_the_images_patches_not_a_sequence_length():
    arch = architecture.from_config(config("vit-base"))
    assert arch.image_tokens == 197 and 85e6 < arch.parameters < 88e6
    short = estimate(config("vit-base"), "train", dp=8, global_batch=64, micro_batch=8, seq=16)
    long = estimate(config("vit-base"), "train", dp=8, global_batch=64, micro_batch=8, seq=4096)
    assert short["step_s"] == pytest.approx(long["step_s"])


def test_a_family_that_cannot_be_estimated_is_refused_with_the_reason(tmp_path):
    mla = tmp_path / "deepseek.json"
    mla.write_text(json.dumps({"model_type": "deepseek_v3", "hidden_size": 7168}))
    r = localneuron("estimate", "--hf-config", str(mla), "--mode", "train")
    assert r.returncode == 2 and "multi-head latent attention" in r.stderr and "Traceback" not in r.stderr
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"model_type": "not_a_model"}))
    r = localneuron("estimate", "--hf-config", str(unknown), "--mode", "prefill")
    assert r.returncode == 2 and "--script" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.parametrize("args, message", [
    (["--seq", str(2 ** 63 - 1), "--mode", "train"], "--seq"),
    (["--input-len", str(2 ** 40), "--mode", "prefill"], "--input-len"),
    (["--global-batch", "-3", "--mode", "train"], "--global-batch"),
    (["--nodes", str(2 ** 62), "--mode", "train"], "nodes"),
])
def test_sizes_beyond_any_run_end_in_a_clear_error(args, message):
    r = localneuron("estimate", "--hf-config", str(CONFIGS / "llama-3-8b.json"), "--target", "trn1", *args)
    assert r.returncode == 2, r.stderr
    assert message in r.stderr and "Traceback" not in r.stderr


def test_a_config_with_sizes_beyond_any_model_ends_in_a_clear_error(tmp_path):
    huge = tmp_path / "huge.json"
    huge.write_text(json.dumps({**config("llama-3-8b"), "vocab_size": 2 ** 62}))
    r = localneuron("estimate", "--hf-config", str(huge), "--mode", "prefill", "--target", "trn1")
    assert r.returncode == 2 and "vocab_size" in r.stderr and "Traceback" not in r.stderr


def test_llama4_with_its_padding_token_beyond_a_ranks_vocabulary_slice_is_estimated_as_written():
    pytest.importorskip("transformers")
    # the published config's pad_token_id (200018) lies in the last rank's slice of the vocabulary
    cfg = small("llama-4-maverick-17b-128e")
    e = run.estimate_hf(cfg, TRN2, Layout.make(TRN2, 1, 4, 1, 1), plan.Request(mode="decode", input_len=32,
                                                                             output_len=4))
    assert e["tpot_s"] > 0 and e["model"]["model_type"] == "llama4_text"
