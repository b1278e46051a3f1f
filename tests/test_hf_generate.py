"""generate() with a static KV cache on `neuron`: Transformers compiles the decoding step with the neuron
backend; progress lines appear while graphs compile, each new prompt length recompiles and the recompile
names the shapes, padding prompts to a bucket length leaves one graph, and the tokens match the CPU's."""
import sys

from hf_support import EXAMPLES, require

require("transformers", "tokenizers")
sys.path.insert(0, str(EXAMPLES))

PROMPTS = ["the neuron", "trainium cores keep", "a compiled"]  # lengths 10, 19, 10


def test_static_cache_generate_recompiles_per_length_and_buckets_bound_it(capfd):
    import torch
    from static_cache_generate import generate_all

    torch._dynamo.reset()
    reference = generate_all(None, device="cpu", prompts=PROMPTS, cache_implementation=None)["outputs"]
    per_length = generate_all(None, prompts=PROMPTS)
    progress = capfd.readouterr().err
    assert per_length["outputs"] == reference
    assert per_length["graphs_compiled"] == 2  # lengths 10 and 19; the second 10 reuses the first graph
    (recompile,) = per_length["recompiles"]
    # the static cache holds prompt + new tokens - 1 positions: 15 for the first prompt, 24 for the second
    assert "[1, 2, 15, 8] float32 -> [1, 2, 24, 8] float32" in recompile["reason"]
    assert "[Neuron] Compiling" in progress and "ready in" in progress and "recompile 1 of this frame" in progress

    torch._dynamo.reset()
    bucketed = generate_all(32, prompts=PROMPTS)
    assert bucketed["graphs_compiled"] == 1 and not bucketed["recompiles"]
    assert bucketed["outputs"] == reference
