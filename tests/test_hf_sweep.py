"""Hugging Face architecture sweep (engine and per-architecture table: tests/hf_sweep.py).

Default tier: a fixed handful of architectures covering decoder, encoder, encoder-decoder, vision and
audio models must all pass. Slow tier (`pytest -m slow`): every model type of Transformers' auto
mappings; at least 95% of those that run on the CPU pass, and each failure has a known cause
(hf_sweep.KNOWN_CAUSES).
"""
import sys

import pytest

from hf_support import require

require("transformers")
import hf_sweep  # noqa: E402

DEFAULT_TIER = ("llama", "gpt2", "bert", "t5", "whisper", "vit")
MIN_PASS_PCT = 95.0


def _log(message):
    print(message, file=sys.stderr)


def test_default_tier_architectures_match_the_cpu():
    sweep = hf_sweep.run_sweep(DEFAULT_TIER, workers=2, log=_log)
    print(hf_sweep.summary_line(sweep))
    failing = {r["model_type"]: (r["status"], r["stage"], r["reason"]) for r in sweep["records"]
               if r["status"] != "pass"}
    assert not failing, failing
    assert {r["model_type"] for r in sweep["records"]} == set(DEFAULT_TIER)


def test_catalogue_covers_causal_lm_and_base_mappings():
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES

    catalogue = hf_sweep.architectures()
    assert set(catalogue) == set(MODEL_MAPPING_NAMES) | set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    # a type with a causal-LM head is swept as that class (it can generate); a base-only type as its base model
    assert catalogue["llama"] == "LlamaForCausalLM" and catalogue["bert"] == "BertLMHeadModel" and catalogue["vit"] == "ViTModel"


@pytest.mark.slow
def test_full_sweep():
    sweep = hf_sweep.run_sweep(workers=2, log=_log)
    summary = hf_sweep.summarize(sweep)
    print(hf_sweep.summary_line(sweep))
    unexplained = [(r["model_type"], r["stage"], r["reason"]) for r in sweep["records"]
                   if r["status"] not in ("pass", "cpu-fails") and hf_sweep.known_cause(r) is None]
    assert not unexplained, unexplained
    assert summary["pass_pct"] >= MIN_PASS_PCT, summary
