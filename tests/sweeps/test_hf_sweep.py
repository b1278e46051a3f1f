"""Hugging Face architecture sweep (engine and per-architecture table: tests/support/hf_sweep.py).

Each swept architecture is checked against its expected status (tests/support/expected/hf_sweep_status.py), so a
regression fails under the architecture's name. Default tier: a fixed set covering decoder, encoder,
encoder-decoder, mixture-of-experts (top-k routing with integer histc), multi-head latent attention,
state-space, vision and audio models, swept once for the module. Slow tier (`pytest -m slow`): every model
type of Transformers' auto mappings, each checked by name; at least 95% of those that run on the CPU pass
and each failure has a known cause (hf_sweep.KNOWN_CAUSES).
"""
import contextlib
import sys

import pytest
import torch

from hf_support import require
from random_replay import RandomDrawMismatch, RecordDraws, ReplayDraws

require("transformers")
import expected_status  # noqa: E402
import hf_sweep  # noqa: E402

DEFAULT_TIER = ("llama", "gpt2", "bert", "t5", "whisper", "vit", "mixtral", "qwen3_moe", "deepseek_v3", "mamba",
                "jamba", "llava")
MIN_PASS_PCT = 95.0
EXPECTED = expected_status.load(hf_sweep.EXPECTED_FILE)


def _log(message):
    print(message, file=sys.stderr)


def _check(record: dict) -> None:
    model_type = record["model_type"]
    assert model_type in EXPECTED, (f"{model_type} has no expected status; regenerate "
                                    "tests/support/expected/hf_sweep_status.py (python tests/support/hf_sweep.py --write-expected)")
    detail = f"{record['stage']}: {record['reason']} (CPU fallbacks: {record['fallbacks']})"
    expected_status.check(model_type, EXPECTED[model_type], hf_sweep.CHECKED_STATUS[record["status"]], detail)


@pytest.fixture(scope="module")
def default_tier():
    sweep = hf_sweep.run_sweep(DEFAULT_TIER, workers=2, log=_log)
    print(hf_sweep.summary_line(sweep))
    return {r["model_type"]: r for r in sweep["records"]}


@pytest.mark.parametrize("model_type", DEFAULT_TIER)
def test_default_tier_architecture_matches_the_cpu(default_tier, model_type):
    assert EXPECTED.get(model_type) == "pass", f"the default tier holds architectures expected to pass ({model_type})"
    _check(default_tier[model_type])


def test_catalogue_covers_causal_lm_and_base_mappings():
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES, MODEL_MAPPING_NAMES

    catalogue = hf_sweep.architectures()
    assert set(catalogue) == set(MODEL_MAPPING_NAMES) | set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)
    # a type with a causal-LM head is swept as that class (it can generate); a base-only type as its base model
    assert catalogue["llama"] == "LlamaForCausalLM" and catalogue["bert"] == "BertLMHeadModel" and catalogue["vit"] == "ViTModel"
    # every architecture of the catalogue has a checked-in expectation, and nothing else does
    assert set(EXPECTED) == set(catalogue), set(EXPECTED) ^ set(catalogue)


def test_chunked_runs_merge_into_one_sweep():
    def sweep(seconds, *records):
        return {"records": [{"model_type": t, "status": s} for t, s in records], "seconds": seconds, "workers": 2,
                "catalogue_size": 3}

    merged = hf_sweep.merge([sweep(10, ("b", "fail"), ("a", "pass")), sweep(5, ("c", "pass"), ("b", "pass"))])
    assert [(r["model_type"], r["status"]) for r in merged["records"]] == [("a", "pass"), ("b", "pass"), ("c", "pass")]
    assert merged["seconds"] == 15
    with pytest.raises(ValueError, match="--from-json"):
        hf_sweep.merge([])


class _SamplesOnBothSides(torch.nn.Module):
    """VITS's pattern: noise drawn on the CPU (no device given) and moved, then noise drawn on the model's
    device (randn_like)."""

    def forward(self, x):
        duration_noise = torch.randn(x.shape).to(x.device)
        return x + duration_noise + torch.randn_like(x) * 0.5


def _run(x, sampling):
    torch.manual_seed(hf_sweep.FORWARD_SEED)
    with sampling:
        return _SamplesOnBothSides()(x).cpu()


def test_samples_drawn_on_both_sides_of_the_device_are_replayed_from_the_cpu_run(tracking, quiet):
    x = torch.randn(3, 5, generator=torch.Generator().manual_seed(2))
    recording = RecordDraws()
    on_cpu = _run(x, recording)
    assert [name for name, _ in recording.draws] == ["aten.randn.default", "aten.randn_like.default"]
    # seeded alike, the same draws in the same order give the CPU's samples even unreplayed: a draw on the device
    # takes the CPU generator's values (localneuron/device/random.py); replaying keeps that so when they differ
    assert torch.equal(_run(x.to("neuron"), contextlib.nullcontext()), on_cpu)
    tracking.clear_op_tracking()
    assert torch.equal(_run(x.to("neuron"), ReplayDraws(recording.draws)), on_cpu)
    assert "aten::normal_" in tracking.get_fallback_ops()  # the sampling op still ran on the device


def test_a_device_run_that_samples_differently_is_reported_not_absorbed(quiet):
    x = torch.zeros(3, 5)
    recording = RecordDraws()
    _run(x, recording)
    with pytest.raises(RandomDrawMismatch, match=r"random draw 1: aten.rand_like.default -> \[\(\(3, 5\), 'float32'\)\]"
                                                  r" on the device, aten.randn_like.default"):
        with ReplayDraws(recording.draws):
            torch.randn(x.shape).to("neuron")
            torch.rand_like(x.to("neuron"))
    with pytest.raises(RandomDrawMismatch, match="drew 1 times, the CPU run 2 times"):
        with ReplayDraws(recording.draws):
            torch.randn(x.shape)
    with pytest.raises(RandomDrawMismatch, match="CPU run drew only 2 times"):
        with ReplayDraws(recording.draws):
            _SamplesOnBothSides()(x.to("neuron"))
            torch.randn(1, device="neuron")


@pytest.fixture(scope="module")
def full_sweep():
    sweep = hf_sweep.run_sweep(workers=2, log=_log)
    print(hf_sweep.summary_line(sweep))
    return sweep


@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(EXPECTED))
def test_architecture_matches_its_expected_status(full_sweep, model_type):
    (record,) = [r for r in full_sweep["records"] if r["model_type"] == model_type]
    _check(record)


@pytest.mark.slow
def test_full_sweep_pass_rate_and_every_failure_explained(full_sweep):
    summary = hf_sweep.summarize(full_sweep)
    unexplained = [(r["model_type"], r["stage"], r["reason"]) for r in full_sweep["records"]
                   if r["status"] not in ("pass", "cpu-fails") and hf_sweep.known_cause(r) is None]
    assert not unexplained, unexplained
    assert summary["pass_pct"] >= MIN_PASS_PCT, summary
