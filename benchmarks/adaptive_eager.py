"""Adaptive Eager: a chain of 2,000 element-wise ops on 16-element tensors (time against eager CPU,
unfused and fused), and the device launches of a Hugging Face Llama greedy-generate step (4 layers,
256 wide) unfused and fused.

Run by hand: `python benchmarks/adaptive_eager.py`. The chain's variants run round robin in one
process and each takes the best of its repeats, so a busy machine disturbs every variant alike.
Fusion is switched between runs (as TORCH_NEURONX_ENABLE_CONCATENATION would set it).
"""
import argparse
import math
import time

import torch

from localneuron.adaptive_eager import engine, stats
from localneuron.ops import tracking

CHAIN_OPS = 2000
VARIANTS = ("cpu", "neuron", "neuron-fused")


def chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    for i in range(CHAIN_OPS // 4):
        x = x * y
        x = x + 0.25
        x = x - y
        x = x.relu()
    return x


def timed(x, y, number: int) -> float:
    start = time.perf_counter()
    for _ in range(number):
        chain(x, y)
    torch.neuron.synchronize()
    return (time.perf_counter() - start) / number


def chain_ratios(number: int, repeat: int) -> None:
    inputs = {device: (torch.rand(16, device=device), torch.rand(16, device=device) + 0.5) for device in ("cpu", "neuron")}
    for fused in (False, True, True):  # warm up: the fused runs compile on their second sighting
        with engine.switched(fused):
            chain(*inputs["neuron"])
    best = {v: math.inf for v in VARIANTS}
    for _ in range(repeat):
        for v in VARIANTS:
            with engine.switched(v == "neuron-fused"):
                best[v] = min(best[v], timed(*inputs["cpu" if v == "cpu" else "neuron"], number))
    with engine.switched(True):
        fused = chain(*inputs["neuron"]).cpu()
    with engine.switched(False):
        unfused = chain(*inputs["neuron"]).cpu()
    cpu = best["cpu"]
    print(f"chain of {CHAIN_OPS} element-wise ops on 16 elements: cpu {cpu * 1e3:.2f} ms, "
          f"neuron {best['neuron'] * 1e3:.2f} ms ({best['neuron'] / cpu:.2f}x), "
          f"fused {best['neuron-fused'] * 1e3:.2f} ms ({best['neuron-fused'] / cpu:.2f}x); "
          f"fused == unfused bitwise: {torch.equal(fused, unfused)}")


def launches(fn) -> dict:
    """Device launches of fn(): every non-view op call is one, except that a fused run is one for all its ops."""
    torch.neuron.synchronize()
    tracking.clear_op_tracking()
    stats.reset()
    fn()
    torch.neuron.synchronize()
    ops = sum(sum(c.values()) for kind, c in tracking.op_counts().items() if kind != tracking.VIEW)
    s = stats.summary()
    return {"op_calls": ops, "launches": ops - s["fused_ops"] + s["fused_launches"], **s}


def llama_launches() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config).eval().to("neuron")
    prompt = torch.randint(0, 1000, (1, 8)).to("neuron")

    def generate():
        with torch.no_grad():
            return model.generate(prompt, max_new_tokens=16, do_sample=False, pad_token_id=0)

    with engine.switched(False):
        unfused_tokens = generate().cpu()
        unfused = launches(generate)
    with engine.switched(True):
        generate()
        generate()  # second sighting of each run: compiled here
        fused_tokens = generate().cpu()
        fused = launches(generate)
    saved = 1 - fused["launches"] / unfused["launches"]
    print(f"llama greedy generate (16 tokens): {unfused['launches']} launches unfused, {fused['launches']} fused "
          f"({saved:.0%} fewer; {fused['fused_launches']} fused launches ran {fused['fused_ops']} ops, "
          f"{fused['ops_per_launch']:.1f} per launch); estimated device time of the fused ops "
          f"{fused['estimated_fused_seconds'] * 1e3:.3f} ms fused vs {fused['estimated_unfused_seconds'] * 1e3:.3f} ms "
          f"unfused; tokens equal: {torch.equal(unfused_tokens, fused_tokens)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--number", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--no-llama", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the machine is shared; one thread keeps the ratios stable
    chain_ratios(args.number, args.repeat)
    if not args.no_llama:
        llama_launches()


if __name__ == "__main__":
    main()
