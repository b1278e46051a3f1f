"""Greedy generation with a static KV cache on `neuron`: Transformers compiles the decoding forward with
torch.compile, and on TorchNeuron every new input shape is a new graph, so each new prompt length
recompiles. Padding prompts (on the left) to a few bucket lengths bounds the number of graphs.

    python examples/hf/static_cache_generate.py            # prompt lengths as they come
    python examples/hf/static_cache_generate.py --bucket 16  # padded to multiples of 16
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch  # noqa: E402

from tiny_text import CORPUS, char_tokenizer, tiny_llama  # noqa: E402

PROMPTS = [text[:n] for text, n in zip(CORPUS, (5, 9, 12, 7, 14, 5))]


def generate_all(bucket: int | None, device: str = "neuron", new_tokens: int = 6, prompts=PROMPTS,
                 cache_implementation: str | None = "static"):
    import torch_neuronx

    tokenizer = char_tokenizer()
    tokenizer.padding_side = "left"  # decoder-only models continue from the right end
    model = tiny_llama(tokenizer).to(device).eval()
    torch_neuronx.reset_dynamo_metrics()
    outputs, started = [], time.perf_counter()
    for prompt in prompts:
        padding = dict(padding="max_length", max_length=-(-len(prompt) // bucket) * bucket) if bucket else {}
        batch = tokenizer([prompt], return_tensors="pt", **padding).to(device)
        tokens = model.generate(**batch, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                                cache_implementation=cache_implementation)
        outputs.append(tokenizer.decode(tokens[0, batch["input_ids"].shape[1]:]))
    seconds = time.perf_counter() - started
    compiled = _compile_report()
    return {"bucket": bucket, "outputs": outputs, "seconds": round(seconds, 2),
            "graphs_compiled": len(torch_neuronx.get_dynamo_metrics()), "recompiles": compiled["recompiles"],
            "recompiled_frames": compiled["recompiled_frames"]}


def _compile_report():
    from localneuron.compiler import report

    return report.collect()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--bucket", type=int, default=None, help="pad prompts to a multiple of this length")
    args = parser.parse_args()
    result = generate_all(args.bucket)
    for frame in result["recompiled_frames"]:
        print(f"{frame['frame']}: {frame['graphs']} graphs, for lengths {frame['lengths']}")
    print(f"{len(PROMPTS)} prompts of lengths {[len(p) for p in PROMPTS]} tokens: {result['graphs_compiled']} graphs "
          f"compiled, {result['seconds']} s")
    print("RESULT " + json.dumps({k: v for k, v in result.items() if k != "recompiles"}), flush=True)


if __name__ == "__main__":
    main()
