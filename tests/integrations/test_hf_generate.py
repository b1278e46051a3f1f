"""generate() with a static KV cache on `neuron`: Transformers compiles the decoding step with the neuron
backend; progress lines appear while graphs compile, each new prompt length recompiles and the recompile
names the shapes and the lengths (in the compile report and a warning), padding prompts to a bucket
length leaves one graph, and the tokens match the CPU's. The example script runs as users run it."""
import sys

from hf_support import EXAMPLES, python_script, require

require("transformers", "tokenizers")
sys.path.insert(0, str(EXAMPLES))

PROMPTS = ["the neuron", "trainium cores keep", "a compiled"]  # lengths 10, 19, 10


def test_static_cache_generate_recompiles_per_length_and_buckets_bound_it(capfd, monkeypatch, recwarn):
    import torch
    from static_cache_generate import generate_all

    monkeypatch.setenv("TORCH_NEURONX_LOG_LEVEL", "1")
    torch._dynamo.reset()
    reference = generate_all(None, device="cpu", prompts=PROMPTS, cache_implementation=None)["outputs"]
    per_length = generate_all(None, prompts=PROMPTS)
    progress = capfd.readouterr().err
    assert per_length["outputs"] == reference
    assert per_length["graphs_compiled"] == 2  # lengths 10 and 19; the second 10 reuses the first graph
    (recompile,) = per_length["recompiles"]
    # the static cache holds prompt + new tokens - 1 positions: 15 for the first prompt, 24 for the second
    assert "[1, 2, 15, 8] float32 -> [1, 2, 24, 8] float32" in recompile["reason"]
    assert recompile["lengths"] == [15, 24]
    (frame,) = per_length["recompiled_frames"]
    assert frame["graphs"] == 2 and frame["lengths"] == [15, 24]
    assert "[Neuron] Compiling" in progress and "ready in" in progress and "recompile 1 of this frame" in progress
    assert "lengths compiled for this frame: 15, 24" in progress
    warned = [str(w.message) for w in recwarn if "recompiles" in str(w.message)]
    assert len(warned) == 1 and "lengths compiled for this frame: 15, 24" in warned[0]
    assert "bucket lengths" in warned[0]

    torch._dynamo.reset()
    bucketed = generate_all(32, prompts=PROMPTS)
    assert bucketed["graphs_compiled"] == 1 and not bucketed["recompiles"]
    assert bucketed["outputs"] == reference


def test_example_script_runs_offline_and_buckets_bound_the_graphs_to_one():
    # per-length recompiles are the test above's, in-process; the script runs as users run it, bucketed
    from static_cache_generate import generate_all

    (bucketed,) = python_script(EXAMPLES / "static_cache_generate.py", "--bucket", "16")
    # prompts of 5, 9, 12, 7, 14 and 5 tokens, padded to 16: one graph for every prompt
    assert bucketed["graphs_compiled"] == 1 and not bucketed["recompiled_frames"]
    assert bucketed["outputs"] == generate_all(None, device="cpu", cache_implementation=None)["outputs"]
