"""Adaptive Eager: a chain of 2,000 element-wise ops on 16-element tensors (time against eager CPU,
unfused and fused, with the processor time of the issuing thread), the floor of that ratio (what every
op issued from Python costs before anything runs), and the device launches of a Hugging Face Llama
greedy-generate step (4 layers, 256 wide) unfused and fused.

Run by hand: `python benchmarks/adaptive_eager.py`. The chain's variants run round robin in one
process, in balanced orders (round_robin.py), and each takes the best of its repeats, so a busy machine
disturbs every variant alike.
Fusion is switched between runs (as TORCH_NEURONX_ENABLE_CONCATENATION would set it).
"""
import argparse
import math
import os
import time

import torch

from localneuron.adaptive_eager import engine, stats
from localneuron.ops import tracking
from round_robin import order_of_round

CHAIN_OPS = 2000
VARIANTS = ("cpu", "neuron", "neuron-fused")
FLOOR_VARIANTS = ("cpu-alloc", "neuron-alloc")


def chain(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    for i in range(CHAIN_OPS // 4):
        x = x * y
        x = x + 0.25
        x = x - y
        x = x.relu()
    return x


def allocations(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The chain with every op replaced by one that only allocates its output: Python binding, dispatcher
    and the device's allocation kernel (PrivateUse1 empty.memory_format), nothing recorded, nothing run."""
    for i in range(CHAIN_OPS):
        x = torch.empty_like(x)
    return x


def timed(fn, x, y, number: int) -> tuple[float, float]:
    """Wall seconds per chain (issue and synchronize) and the issuing thread's processor seconds per chain."""
    start, start_cpu = time.perf_counter(), time.thread_time()
    for _ in range(number):
        fn(x, y)
    torch.neuron.synchronize()
    return (time.perf_counter() - start) / number, (time.thread_time() - start_cpu) / number


def chain_ratios(number: int, repeat: int) -> None:
    inputs = {device: (torch.rand(16, device=device), torch.rand(16, device=device) + 0.5)
              for device in ("cpu", "neuron")}
    for fused in (False, True, True):  # warm up: the fused runs compile on their second sighting
        with engine.switched(fused):
            chain(*inputs["neuron"])
    best = {v: math.inf for v in VARIANTS + FLOOR_VARIANTS}
    best_cpu = dict(best)
    for round_ in range(repeat):
        for v in order_of_round(VARIANTS + FLOOR_VARIANTS, round_):
            with engine.switched(v == "neuron-fused"):
                wall, cpu_time = timed(allocations if v.endswith("alloc") else chain,
                                       *inputs[v.split("-")[0]], number)
            best[v], best_cpu[v] = min(best[v], wall), min(best_cpu[v], cpu_time)
    with engine.switched(True):
        fused = chain(*inputs["neuron"]).cpu()
    with engine.switched(False):
        unfused = chain(*inputs["neuron"]).cpu()
    cpu = best["cpu"]
    per_op = {v: t / CHAIN_OPS * 1e6 for v, t in best.items()}
    issuing = {v: t / CHAIN_OPS * 1e6 for v, t in best_cpu.items()}
    print(f"load average {os.getloadavg()[0]:.1f}; best of {repeat} rounds of {number} chains, round robin")
    print(f"chain of {CHAIN_OPS} element-wise ops on 16 elements: cpu {cpu * 1e3:.2f} ms, "
          f"neuron {best['neuron'] * 1e3:.2f} ms ({best['neuron'] / cpu:.2f}x), "
          f"fused {best['neuron-fused'] * 1e3:.2f} ms ({best['neuron-fused'] / cpu:.2f}x); "
          f"fused == unfused bitwise: {torch.equal(fused, unfused)}")
    print("per op, wall (issuing thread's processor time) in us: " +
          ", ".join(f"{v} {per_op[v]:.2f} ({issuing[v]:.2f})" for v in VARIANTS))
    print(f"floor: an op that only allocates its output (empty_like: binding, dispatcher, the device's "
          f"allocation kernel) costs {per_op['neuron-alloc']:.2f} us on neuron ({issuing['neuron-alloc']:.2f}), "
          f"{per_op['cpu-alloc']:.2f} us on cpu, against {per_op['cpu']:.2f} us ({issuing['cpu']:.2f}) for a cpu op "
          f"of the chain: issued op by op from Python, the chain on neuron cannot beat "
          f"{issuing['neuron-alloc'] / issuing['cpu']:.2f}x eager cpu in processor time however its work runs "
          f"(the binary ops' argument parsing and the wrapping of Python numbers come on top)")


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
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--no-llama", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)  # the machine is shared; one thread keeps the ratios stable
    chain_ratios(args.number, args.repeat)
    if not args.no_llama:
        llama_launches()


if __name__ == "__main__":
    main()
