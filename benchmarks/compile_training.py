"""torch.compile(backend="neuron") training-step speed and cold/warm compile time.

Run by hand: `python benchmarks/compile_training.py`. For each model it measures, in one run, the
training step (forward, loss, backward, AdamW step) in eager CPU, with backend="neuron" on the
neuron device and with backend="inductor" on the CPU (best of repeats, one thread, as in
eager_overhead.py). The optimizer step is compiled too, by the same backend as the model. Then two
fresh processes compile the same model against one empty compile cache: the first compiles cold,
the second starts warm; compile time is the first step's time minus a steady-state step (module
imports excluded).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn


def mlp():
    model = nn.Sequential(nn.Linear(512, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 10))
    return model, (lambda d: (torch.randn(64, 512, device=d), torch.randint(0, 10, (64,), device=d)))


def transformer():
    layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=512, batch_first=True, dropout=0.0)
    model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False), nn.Flatten(),
                          nn.Linear(128 * 32, 10))
    return model, (lambda d: (torch.randn(8, 32, 128, device=d), torch.randint(0, 10, (8,), device=d)))


MODELS = {"mlp": mlp, "transformer": transformer}
# variant -> (device, torch.compile backend or None for eager)
VARIANTS = {"eager cpu": ("cpu", None), "neuron compiled": ("neuron", "neuron"), "inductor cpu": ("cpu", "inductor")}


def training_step(name: str, device: str, backend: str | None):
    torch.manual_seed(0)
    model, make_batch = MODELS[name]()
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = make_batch(device)
    loss_fn = nn.CrossEntropyLoss()

    def loss_of(x, y):
        return loss_fn(model(x), y)

    forward = torch.compile(loss_of, backend=backend) if backend else loss_of
    update = torch.compile(optimizer.step, backend=backend) if backend else optimizer.step

    def step():
        optimizer.zero_grad(set_to_none=True)
        forward(x, y).backward()
        update()
        if device == "neuron":
            torch.neuron.synchronize()

    return step


def best_step_times(steps: dict, number: int, repeat: int) -> dict:
    """Best mean step time of each variant; variants take turns, so load changes on a shared machine hit all alike."""
    for step in steps.values():
        for _ in range(3):
            step()
    best = dict.fromkeys(steps, float("inf"))
    for _ in range(repeat):
        for name, step in steps.items():
            start = time.perf_counter()
            for _ in range(number):
                step()
            best[name] = min(best[name], (time.perf_counter() - start) / number)
    return best


def compile_time_in_this_process(name: str) -> dict:
    # Importing Dynamo, Inductor and the backend is the cost of starting Python with torch.compile,
    # the same in both processes and for any backend; compile time starts after it.
    import torch._inductor.compile_fx  # noqa: F401
    import localneuron.compiler.backend  # noqa: F401

    start = time.perf_counter()
    step = training_step(name, "neuron", "neuron")
    step()
    first = time.perf_counter() - start
    steady = best_step_times({"neuron": step}, 3, 3)["neuron"]
    from localneuron.compiler import get_dynamo_metrics

    graphs = get_dynamo_metrics()
    return {"compile_s": first - steady, "graphs": len(graphs), "misses": sum(g.cache_misses for g in graphs),
            "hits": sum(g.cache_hits for g in graphs)}


def cold_and_warm(name: str) -> tuple[dict, dict]:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCH_NEURONX_NEFF_CACHE_DIR": cache,
               "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR": os.path.join(cache, "locks")}
        runs = []
        for _ in range(2):
            done = subprocess.run([sys.executable, __file__, "--compile-child", name], env=env, check=True,
                                  capture_output=True, text=True)
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        return runs[0], runs[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--models", nargs="*", default=list(MODELS))
    parser.add_argument("--compile-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the machine is shared; one thread keeps the ratios stable
    if args.compile_child:
        print(json.dumps(compile_time_in_this_process(args.compile_child)))
        return
    print("Training step (AdamW), best of repeats, milliseconds")
    print(f"{'model':<12} " + " ".join(f"{v:>16}" for v in VARIANTS) + f" {'neuron/inductor':>16} {'neuron/eager':>13}")
    for name in args.models:
        steps = {v: training_step(name, device, backend) for v, (device, backend) in VARIANTS.items()}
        times = best_step_times(steps, args.steps, args.repeat)
        print(f"{name:<12} " + " ".join(f"{t * 1e3:16.2f}" for t in times.values())
              + f" {times['neuron compiled'] / times['inductor cpu']:16.2f}"
              + f" {times['neuron compiled'] / times['eager cpu']:13.2f}")
    print("\nCompile time of the neuron training step in a fresh process, seconds (empty cache, then warm)")
    for name in args.models:
        cold, warm = cold_and_warm(name)
        print(f"{name:<12} cold {cold['compile_s']:7.2f} ({cold['misses']} graphs generated)   warm "
              f"{warm['compile_s']:7.2f} ({warm['hits']} cache hits, {warm['misses']} generated)   "
              f"warm/cold {warm['compile_s'] / cold['compile_s']:.2f}")


if __name__ == "__main__":
    main()
