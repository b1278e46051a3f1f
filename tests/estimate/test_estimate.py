"""`localneuron estimate`: what-if estimates at full size on fake tensors. Timing numbers are pinned
only by their structure (monotonic, parts add up); the calibration against published results is
reported by benchmarks/calibration.py, not asserted here."""
import ast
import functools
import json
from pathlib import Path

import pytest

import cli_runner
from fresh_python import run_python
from localneuron.costmodel.hardware import chip
from localneuron.estimate import architecture, plan, run
from localneuron.estimate.layout import Layout, LayoutError

ROOT = Path(__file__).resolve().parents[2]
localneuron = functools.partial(cli_runner.localneuron, cwd=ROOT, timeout=600)
# the command's main() in this process: for --hf-config and --model-fn runs (no --script, no `--json -`), which
# need no interpreter of their own; test_cli_prints_a_summary_and_writes_json runs it as users do
in_process = functools.partial(cli_runner.localneuron_in_process, cwd=ROOT)
CONFIGS = ROOT / "benchmarks" / "configs"
TESTS = Path(__file__).resolve().parents[1] / "support"
TRN1, TRN2 = chip("trn1"), chip("trn2")


def small_llama(layers=4, hidden=512, **extra):
    return architecture.from_config({"model_type": "llama", "hidden_size": hidden, "num_hidden_layers": layers,
                                     "num_attention_heads": 8, "num_key_value_heads": 4,
                                     "intermediate_size": 4 * hidden, "vocab_size": 4096, **extra})


def estimate(arch, mode, target=TRN2, nodes=1, tp=1, pp=1, dp=None, **request):
    return run.estimate(arch, target, Layout.make(target, nodes, tp, pp, dp), plan.Request(mode=mode, **request))


SCHEMA = {"train": ("step_s", "seq_per_s", "mfu"), "prefill": ("ttft_s",), "decode": ("tpot_s", "ttft_s")}
MEMORY_PARTS = ("parameters", "gradients", "optimizer_state", "activations", "kv_cache", "total")


@pytest.mark.parametrize("mode", ["train", "prefill", "decode"])
def test_json_schema_and_breakdown_adds_up(mode):
    e = estimate(small_llama(), mode, tp=2, pp=2, global_batch=64, seq=256, input_len=64, output_len=32)
    json.dumps(e)
    for field in SCHEMA[mode] + ("fits", "hbm_per_core_bytes", "hbm_capacity_per_core_bytes", "breakdown"):
        assert field in e, field
    assert set(e["breakdown"]) == {"compute", "memory", "collectives", "launches", "pipeline_bubble", "host"}
    timed = {"train": "step_s", "prefill": "ttft_s", "decode": "tpot_s"}[mode]
    assert sum(e["breakdown"].values()) == pytest.approx(e[timed])
    memory = e["hbm_per_core_bytes"]
    assert set(memory) == set(MEMORY_PARTS)
    assert memory["total"] == sum(v for k, v in memory.items() if k != "total")
    assert e["fits"] == (memory["total"] <= e["hbm_capacity_per_core_bytes"])
    if mode == "train":
        assert e["breakdown"]["pipeline_bubble"] > 0 and e["breakdown"]["collectives"] > 0
        assert 0 < e["mfu"] < 1 and memory["optimizer_state"] > memory["parameters"]
    if mode == "decode":
        assert memory["kv_cache"] > 0 and memory["gradients"] == 0


def test_time_and_memory_grow_with_the_model_and_the_work():
    steps = [estimate(small_llama(layers=n), "train", global_batch=64, seq=256)["step_s"] for n in (2, 4, 8)]
    assert steps == sorted(steps)
    # four times the layers more than doubles the step where every gradient all-reduce runs one ring (trn1); on a
    # whole trn2 instance the 8-layer model's gradients pass 56 MB, where the runtime takes KangaRing, cheaper a byte
    trn1 = [estimate(small_llama(layers=n), "train", TRN1, global_batch=64, seq=256)["step_s"] for n in (2, 4, 8)]
    assert trn1 == sorted(trn1) and trn1[-1] > 2 * trn1[0]
    wider = [estimate(small_llama(hidden=h), "train", global_batch=64, seq=256) for h in (256, 512, 1024)]
    assert [e["step_s"] for e in wider] == sorted(e["step_s"] for e in wider)
    assert [e["hbm_per_core_bytes"]["total"] for e in wider] == sorted(e["hbm_per_core_bytes"]["total"] for e in wider)
    tpot = [estimate(small_llama(), "decode", input_len=n, output_len=64)["tpot_s"] for n in (64, 1024, 8192)]
    assert tpot == sorted(tpot)


def test_pipeline_bubble_follows_1f1b_and_zero1_shards_the_optimizer():
    e = estimate(small_llama(layers=8), "train", tp=1, pp=4, global_batch=128, seq=256)
    m, pp, stage = e["micro_batches_per_step"], 4, e["micro_batch_stage_s"]
    assert e["breakdown"]["pipeline_bubble"] == pytest.approx((pp - 1) * stage)
    assert e["step_s"] > (m + pp - 1) * stage   # plus the data-parallel gradient sync and the optimizer
    plain = estimate(small_llama(), "train", global_batch=64, seq=256)
    sharded = estimate(small_llama(), "train", global_batch=64, seq=256, zero1=True)
    assert sharded["hbm_per_core_bytes"]["optimizer_state"] == pytest.approx(
        plain["hbm_per_core_bytes"]["optimizer_state"] / plain["layout"]["dp"], rel=1e-6)


def test_llama_3_1_70b_fits_on_32_trn1_nodes_with_tp32_pp8():
    _, arch = architecture.load(str(CONFIGS / "llama-3.1-70b.json"))
    e = estimate(arch, "train", target=TRN1, nodes=32, tp=32, pp=8, dp=4, micro_batch=1, global_batch=1024, seq=8192)
    assert e["fits"], e["hbm_per_core_bytes"]
    assert e["layout"]["world"] == 1024 and e["hbm_capacity_per_core_bytes"] == 16 << 30


def test_llama_3_70b_in_bf16_does_not_fit_on_one_neuroncore():
    _, arch = architecture.load(str(CONFIGS / "llama-3-70b.json"))
    e = estimate(arch, "decode", target=TRN1, nodes=1, tp=1, pp=1, input_len=128, output_len=128)
    assert not e["fits"]
    assert e["hbm_per_core_bytes"]["parameters"] > 2 * 70e9 * 0.99   # the whole model on the core


def test_bad_layouts_and_configs_are_explained():
    with pytest.raises(LayoutError, match="omit --dp"):
        Layout.make(TRN1, 32, 32, 8, 8)
    assert Layout.make(TRN1, 32, 32, 8, 1).world == 256   # cores may stay idle
    with pytest.raises(LayoutError, match="multiple of"):
        Layout.make(TRN1, 1, 3, 1)
    with pytest.raises(architecture.ConfigError, match="--model-fn"):
        architecture.from_config({"model_type": "mamba", "hidden_size": 8})
    with pytest.raises(architecture.ConfigError, match="num_hidden_layers"):
        architecture.from_config({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                                  "intermediate_size": 128, "vocab_size": 100})
    with pytest.raises(architecture.ConfigError, match="positive integer"):
        small_llama(layers=-1)
    with pytest.raises(plan.RequestError, match="multiple of"):
        estimate(small_llama(), "train", tp=1, global_batch=3, seq=256)


REAL_TRAINING_PEAK = """
import sys
sys.path.insert(0, {tests!r})
import torch, estimate_models
model, (x,) = estimate_models.{factory}()
model, x = model.to("neuron"), x.to("neuron")
optimizer = torch.optim.AdamW(model.parameters())
for step in range(2):   # the second step runs with the optimizer state allocated
    if step:
        torch.neuron.reset_peak_memory_stats()
    loss = model(x).float().sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    del loss
print(torch.neuron.max_memory_allocated())
"""


def test_estimated_memory_of_a_small_model_matches_a_real_run(monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    e = run.estimate_factory("estimate_models:tiny_transformer", TRN2, Layout.make(TRN2, 1, dp=1),
                         plan.Request(mode="train", dtype="fp32"))
    # the same model, batch and dtype trained for real on the device, in its own process
    real = run_python(REAL_TRAINING_PEAK.format(tests=str(TESTS), factory="tiny_transformer"), timeout=300)
    assert real.returncode == 0, real.stderr
    assert e["hbm_per_core_bytes"]["total"] == pytest.approx(int(real.stdout.strip().splitlines()[-1]), rel=0.10)
    saves = e["compile_saves"]   # compiled graphs beat op-by-op launches
    assert saves["compiled_forward_s"] < saves["eager_forward_s"]


def test_estimate_and_a_real_run_agree_on_fallbacks(monkeypatch):
    monkeypatch.syspath_prepend(str(TESTS))
    e = run.estimate_factory("estimate_models:with_a_fallback", TRN2, Layout.make(TRN2, 1, dp=1),
                         plan.Request(mode="prefill", dtype="fp32"))
    # the real run in its own process: its fallback warnings are once per process
    real = run_python(f"import sys; sys.path.insert(0, {str(TESTS)!r}); import torch, torch_neuronx, estimate_models\n"
                      "model, (x,) = estimate_models.with_a_fallback()\n"
                      "model.to('neuron')(x.to('neuron'))\n"
                      "print(torch_neuronx.get_fallback_ops())")
    assert real.returncode == 0, real.stderr
    assert set(e["ops"]["cpu_fallbacks"]) == set(ast.literal_eval(real.stdout.strip().splitlines()[-1])) == {"aten::linalg_qr"}




def test_cli_prints_a_summary_and_writes_json(tmp_path):
    out = tmp_path / "estimate.json"
    r = localneuron("estimate", "--hf-config", str(CONFIGS / "llama-2-13b.json"), "--target", "trn1", "--nodes", "1",
                    "--tp", "32", "--mode", "decode", "--input-len", "4096", "--output-len", "4096", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "time per output token" in r.stdout and "HBM per NeuronCore" in r.stdout and "recipe assumed:" in r.stdout
    data = json.loads(out.read_text())
    assert data["fits"] is True and data["tpot_s"] > 0 and data["layout"]["tp"] == 32


def test_cli_estimates_a_model_factory_with_tensor_and_pipeline_parallelism(tmp_path):
    out = tmp_path / "estimate.json"
    r = in_process("estimate", "--model-fn", str(TESTS / "estimate_models.py") + ":parallel_mlp", "--target", "trn1",
                 "--tp", "2", "--pp", "2", "--dp", "1", "--mode", "train", "--global-batch", "32", "--json", str(out))
    assert r.returncode == 0, r.stderr
    assert "launched op by op would take" in r.stdout and "how far to trust it" in r.stdout
    data = json.loads(out.read_text())
    assert data["layout"]["tp"] == 2 and data["layout"]["pp"] == 2 and data["breakdown"]["pipeline_bubble"] > 0
    assert sum(data["breakdown"].values()) == pytest.approx(data["step_s"])


def test_cli_rejects_bad_input_with_a_clear_message(tmp_path):
    r = in_process("estimate", "--hf-config", str(tmp_path / "missing.json"), "--mode", "train")
    assert r.returncode == 2 and "no such file" in r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    r = in_process("estimate", "--hf-config", str(bad), "--mode", "train")
    assert r.returncode == 2 and "not valid JSON" in r.stderr
    r = in_process("estimate", "--hf-config", str(CONFIGS / "gpt3-23b.json"), "--target", "trn9", "--mode", "train")
    assert r.returncode == 2 and "unknown Trainium target" in r.stderr


@pytest.mark.parametrize("config", ["gpt3-23b.json", "llama-2-13b.json", "llama-3.1-70b.json"])
def test_builder_and_transformers_describe_the_same_model(config):
    pytest.importorskip("transformers")
    from localneuron.estimate import hf

    raw, arch = architecture.load(str(CONFIGS / config))
    assert hf.parameter_count(hf.hf_config(raw)) == arch.parameters
    untied = architecture.from_config({**raw, "tie_word_embeddings": not arch.tied_embeddings})
    assert hf.parameter_count(hf.hf_config({**raw, "tie_word_embeddings": not arch.tied_embeddings})) == \
        untied.parameters != arch.parameters


def test_decode_reads_the_kv_cache_in_one_token_descriptors():
    # the cache lies token by token: 4 kv heads x 64 x bf16 = 512 B per token and layer, read at that
    # descriptor size's DMA rate, not the bulk rate
    arch = small_llama()
    memory = [estimate(arch, "decode", target=TRN1, input_len=n, output_len=2)["breakdown"]["memory"]
              for n in (4096, 8192)]
    cache_bytes = arch.layers * 2 * arch.kv_heads * 4096 * arch.head_dim * 2
    assert memory[1] - memory[0] == pytest.approx(TRN1.hbm_transfer_s(cache_bytes, 512), rel=0.1)


def test_a_served_model_decodes_at_its_compiled_batch_and_prefills_the_request():
    arch, lengths = small_llama(), dict(input_len=1024, output_len=256)
    served = estimate(arch, "decode", tp=4, batch=1, compiled_batch=32, **lengths)
    alone = estimate(arch, "decode", tp=4, batch=1, **lengths)
    full = estimate(arch, "decode", tp=4, batch=32, **lengths)
    assert served["tpot_s"] == pytest.approx(full["tpot_s"]) and served["tpot_s"] > alone["tpot_s"]
    assert served["ttft_s"] == pytest.approx(alone["ttft_s"]) and served["ttft_s"] < full["ttft_s"]
    # the cache holds every compiled slot
    assert served["hbm_per_core_bytes"]["kv_cache"] == full["hbm_per_core_bytes"]["kv_cache"]
    assert served["request"]["batch"] == 1 and served["request"]["compiled_batch"] == 32
    assert served["tokens_per_s"] == pytest.approx(1 / served["tpot_s"])   # the request's own tokens
    prefill = estimate(arch, "prefill", tp=4, batch=1, compiled_batch=32, **lengths)
    assert prefill["ttft_s"] == pytest.approx(alone["ttft_s"])
    assert prefill["hbm_per_core_bytes"]["kv_cache"] > estimate(arch, "prefill", tp=4, batch=1,
                                                                **lengths)["hbm_per_core_bytes"]["kv_cache"]


@pytest.mark.parametrize("request_fields, message", [
    ({"mode": "decode", "batch": 4, "compiled_batch": 2}, "--batch 4 does not fit a graph compiled for --compiled-batch 2"),
    ({"mode": "train", "compiled_batch": 2}, "give it with --mode prefill or decode"),
    ({"mode": "decode", "compiled_batch": 0}, "--compiled-batch must be a positive integer"),
])
def test_a_compiled_batch_that_cannot_be_is_refused(request_fields, message):
    with pytest.raises(plan.RequestError, match=message):
        plan.Request(**request_fields)


def test_the_cli_prices_a_compiled_batch_and_refuses_it_where_inputs_set_the_batch(tmp_path):
    config = str(CONFIGS / "llama-3.1-8b.json")
    r = in_process("estimate", "--hf-config", config, "--tp", "4", "--mode", "decode", "--compiled-batch", "16")
    assert r.returncode == 0, r.stderr
    assert "every step runs the 16 slots the graph was compiled for" in r.stdout
    r = in_process("estimate", "--model-fn", str(TESTS / "estimate_models.py") + ":parallel_mlp", "--mode", "decode",
                 "--compiled-batch", "16")
    assert r.returncode == 2 and "--compiled-batch goes with --hf-config" in r.stderr
    script = tmp_path / "train.py"
    script.write_text("pass\n")
    r = localneuron("estimate", "--compiled-batch", "16", "--script", str(script))
    assert r.returncode == 2 and "--compiled-batch does not go with --script" in r.stderr


def test_the_cli_pads_to_the_compiled_sequence_length_only_for_a_stack_that_compiles_one_length():
    config = str(CONFIGS / "llama-3.1-8b.json")
    common = ("estimate", "--hf-config", config, "--target", "trn2", "--tp", "4", "--mode", "prefill", "--input-len",
              "512", "--json", "-")

    def seconds(*extra):
        r = localneuron(*common, *extra)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout[r.stdout.index("{"):])["breakdown"]["compute"]

    padded, unpadded = (seconds("--stack", "optimum-neuron", *extra) for extra in (("--compiled-seq", "4096"), ()))
    assert padded > 4 * unpadded  # 4096 positions encoded, not 512 (attention grows faster than the GEMMs)
    assert seconds("--compiled-seq", "4096") == seconds()  # the default stack buckets: the request's own length
    r = in_process(*common[:-2], "--stack", "optimum-neuron", "--compiled-seq", "4096")
    assert "encoded padded to the 4096 positions the graphs were compiled for" in r.stdout, r.stderr
    r = localneuron(*common, "--compiled-seq", "256")
    assert r.returncode == 2 and "--compiled-seq 256 does not hold the request's 512 tokens" in r.stderr


@pytest.mark.parametrize("tp", [1, 4])
def test_the_recipes_loss_over_a_split_vocabulary_all_reduces_three_values_per_token(tp):
    from localneuron.estimate import recipe
    from localneuron.estimate.collective_markers import VOCABULARY_PARALLEL_LOSS_ALL_REDUCES

    request = plan.Request(mode="train", micro_batch=2, seq=256)
    head = recipe.train_stack(small_llama(layers=1), Layout.make(TRN2, 1, tp, 1, None), request).last
    calls = [call for calls in head.collectives.values() for call in calls]
    tokens = request.micro_batch * request.seq
    loss_reductions = [call for call in calls if call == ("all_reduce", tokens * 4)]
    assert len(loss_reductions) == (VOCABULARY_PARALLEL_LOSS_ALL_REDUCES if tp > 1 else 0), calls


def test_an_option_not_given_takes_the_one_default_a_request_declares():
    """The parser leaves out what is not given, so EstimateOptions' defaults apply, and a request's sizes default to
    plan.Request's own: one source for each default, which the help text quotes."""
    import argparse
    from dataclasses import fields

    from localneuron.cli import estimate as cli_estimate
    from localneuron.estimate import command, plan

    commands = argparse.ArgumentParser().add_subparsers(dest="command")
    parser = cli_estimate.add_parser(commands)
    given = vars(parser.parse_args(["--hf-config", "config.json", "--seq", "512"]))
    assert given == {"hf_config": "config.json", "seq": 512, "script_args": []}
    options = command.EstimateOptions(**given)
    request_defaults = {f.name: f.default for f in fields(plan.Request) if f.name != "mode"}
    for name, default in request_defaults.items():
        if name in ("seq", "recompute"):  # given above; recompute is chosen by --as-written
            continue
        assert getattr(options, name) == default, name
    assert f"default {plan.Request.seq}" in parser.format_help()
