"""Eager speed of the neuron device over eager CPU: per-op overhead on tiny tensors, small training
steps (MLP, GPT-style transformer, convnet) and a Hugging Face Llama (4 layers, 256 wide: train step,
no-grad forward, greedy generate), with asynchronous execution (the default: small work runs on the
issuing thread while its stream is idle, csrc/queue/queue.h kRunInPlaceMaxNs), with every op handed to the
queue's worker ("queued": the policy's alternative), and with NEURON_LAUNCH_BLOCKING=1 semantics (every op
runs when issued). --run-in-place-max-ns N (and --run-in-place-max-bytes N, for work not yet measured) try
other thresholds for the default variant.

Run by hand: `python benchmarks/eager_overhead.py` (`--only tiny` for the per-op table alone, e.g. to
compare two builds). The variants run round robin in one process, in orders where each follows every
other equally often (round_robin.py; --repeat a multiple of 4 balances them fully), the launch mode
switched between runs, and each figure is the best of its repeats, so a busy machine disturbs every
variant alike.
Every neuron timing ends with torch.neuron.synchronize(): queued work is inside the time. Next to wall
time, the workloads' processor time (time.process_time: every thread of the process, the queue's
worker included) is given: on a shared machine it moves less than wall time, and it shows what overlap
costs in total work.
"""
import argparse
import math
import time

import torch
import torch.nn as nn

from localneuron import _C
from round_robin import order_of_round

VARIANTS = ("cpu", "neuron", "neuron-queued", "neuron-blocking")  # neuron: asynchronous execution


def tiny_ops() -> dict:
    def make(op, nargs):
        def on(device):
            tensors = [torch.randn(4, 4, device=device) for _ in range(nargs)]
            return lambda: op(*tensors)
        return on
    return {"add 4x4": make(torch.add, 2), "mul 4x4": make(torch.mul, 2),
            "add_ 4x4": make(lambda a, b: a.add_(b), 2), "sum 4x4": make(torch.sum, 1),
            "t() view": make(torch.t, 1)}


def small_models() -> dict:
    def mlp():
        return nn.Sequential(nn.Linear(512, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 10))

    def gpt():
        layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512, batch_first=True, dropout=0.0)
        return nn.TransformerEncoder(layer, num_layers=2)

    def conv():
        return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                             nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                             nn.Linear(32, 10))

    def training_step(make, shape):
        def on(device):
            torch.manual_seed(0)
            model = make().to(device)
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
            x = torch.randn(*shape, device=device)

            def step():
                optimizer.zero_grad(set_to_none=True)
                model(x).float().pow(2).mean().backward()
                optimizer.step()
            return step
        return on

    return {"mlp train": training_step(mlp, (64, 512)), "gpt train": training_step(gpt, (8, 32, 128)),
            "conv train": training_step(conv, (16, 3, 32, 32))}


def llama_workloads() -> dict:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=1000, hidden_size=256, intermediate_size=688, num_hidden_layers=4,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256)

    def model_on(device):
        torch.manual_seed(0)
        return LlamaForCausalLM(config).to(device)

    tokens = torch.randint(0, 1000, (4, 64), generator=torch.Generator().manual_seed(1))
    prompt = tokens[:1, :8]

    def train(device):  # its own model: the inference workloads below keep their weights
        model, x = model_on(device), tokens.to(device)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step():
            optimizer.zero_grad(set_to_none=True)
            model(input_ids=x, labels=x).loss.backward()
            optimizer.step()
        return step

    def forward(device):
        model, x = model_on(device).eval(), tokens.to(device)
        return lambda: model(input_ids=x).logits.sum().item()

    def generate(device):
        model, p = model_on(device).eval(), prompt.to(device)

        def run():  # exactly 16 new tokens on every device: no early stop at an end-of-sequence token
            out = model.generate(p, max_new_tokens=16, min_new_tokens=16, do_sample=False, pad_token_id=0)
            assert out.shape[1] == p.shape[1] + 16
        return run

    with_no_grad = {"llama forward", "llama generate"}
    workloads = {"llama train": train, "llama forward": forward, "llama generate": generate}
    return {name: (make, name in with_no_grad) for name, make in workloads.items()}


def timed(fn, number: int, no_grad: bool) -> tuple:
    """(wall seconds, processor seconds) per call."""
    with torch.set_grad_enabled(not no_grad):
        start, start_cpu = time.perf_counter(), time.process_time()
        for _ in range(number):
            fn()
        torch.neuron.synchronize()
        return (time.perf_counter() - start) / number, (time.process_time() - start_cpu) / number


def switch_to(variant: str, limits: tuple) -> None:
    _C.set_launch_blocking(variant == "neuron-blocking")
    _C.set_run_in_place_limits(*((0, 0) if variant == "neuron-queued" else limits))


def run(workloads: dict, number: int, repeat: int, limits: tuple) -> tuple:
    """({(name, variant): best wall seconds}, {(name, variant): best processor seconds}), measured round robin."""
    built = {}
    for name, (make, no_grad) in workloads.items():
        for device in ("cpu", "neuron"):
            fn = make(device)
            with torch.set_grad_enabled(not no_grad):
                for _ in range(3):  # warm up: first calls compile, queued layouts are learned
                    fn()
            built[name, device] = fn
    best = {(name, v): math.inf for name in workloads for v in VARIANTS}
    best_cpu = dict(best)
    for round_ in range(repeat):
        # The variant timed right after another pays for the switch (measured: the same settings came out 6-10%
        # slower in the slot after "cpu"), so each variant gets an untimed call first and the order is balanced.
        order = order_of_round(VARIANTS, round_)
        for name, (_, no_grad) in workloads.items():
            for variant in order:
                switch_to(variant, limits)
                fn = built[name, "cpu" if variant == "cpu" else "neuron"]
                timed(fn, 1, no_grad)
                wall, processor = timed(fn, number, no_grad)
                best[name, variant] = min(best[name, variant], wall)
                best_cpu[name, variant] = min(best_cpu[name, variant], processor)
    switch_to("neuron", (-1, -1))
    return best, best_cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tiny-number", type=int, default=5000)
    parser.add_argument("--number", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=8)
    parser.add_argument("--only", choices=("tiny", "models"))
    parser.add_argument("--no-llama", action="store_true")
    parser.add_argument("--run-in-place-max-bytes", type=int, default=-1,
                        help=f"threshold of the default variant for work not yet measured (-1: the built-in "
                             f"{_C.RUN_IN_PLACE_MAX_BYTES})")
    parser.add_argument("--run-in-place-max-ns", type=int, default=-1,
                        help=f"threshold of the default variant (-1: the built-in {_C.RUN_IN_PLACE_MAX_NS})")
    args = parser.parse_args()
    limits = (args.run_in_place_max_bytes, args.run_in_place_max_ns)
    torch.set_num_threads(1)  # the machine is shared; one thread keeps the ratios stable
    if args.only != "models":
        tiny = {name: (make, True) for name, make in tiny_ops().items()}
        best, _ = run(tiny, args.tiny_number, args.repeat, limits)
        print("Per-op time on tiny tensors, best of repeats, microseconds (overhead over cpu)")
        print(f"{'op':<10} {'cpu':>8} " + " ".join(f"{v.removeprefix('neuron-'):>17}" for v in VARIANTS[1:]))
        for name in tiny:
            cpu, *neuron = (best[name, v] * 1e6 for v in VARIANTS)
            print(f"{name:<10} {cpu:8.2f} " + " ".join(f"{t:8.2f} ({t - cpu:+6.2f})" for t in neuron))
    if args.only == "tiny":
        return
    models = {name: (make, False) for name, make in small_models().items()}
    if not args.no_llama:
        models.update(llama_workloads())
    best, best_cpu = run(models, args.number, args.repeat, limits)
    for title, table in (("wall time", best), ("processor time", best_cpu)):
        print(f"\nWorkloads, {title}, best of repeats: milliseconds, and ratio over cpu")
        print(f"{'workload':<16} {'cpu ms':>8} " + " ".join(f"{v.removeprefix('neuron-'):>9}" for v in VARIANTS[1:])
              + "   ratios " + " / ".join(v.removeprefix("neuron-") for v in VARIANTS[1:]))
        ratios = {v: {} for v in VARIANTS[1:]}
        for name in models:
            cpu = table[name, "cpu"]
            for v in ratios:
                ratios[v][name] = table[name, v] / cpu
            print(f"{name:<16} {cpu * 1e3:8.2f} " + " ".join(f"{table[name, v] * 1e3:9.2f}" for v in ratios)
                  + "   " + " / ".join(f"{r[name]:5.2f}" for r in ratios.values()))
        for v, by_name in ratios.items():
            llama = [r for name, r in by_name.items() if name.startswith("llama")]
            if llama:
                print(f"llama geomean {v}: {math.exp(sum(map(math.log, llama)) / len(llama)):.2f}")


if __name__ == "__main__":
    main()
