"""Per-op overhead of the neuron device over the CPU, and training-step time ratios.

Run by hand: `python benchmarks/eager_overhead.py`. Timings on a shared machine are noisy, so every
comparison is a ratio or difference measured in the same run (best of several repeats).
"""
import argparse
import time

import torch
import torch.nn as nn


def best_time(fn, number: int, repeat: int) -> float:
    for _ in range(max(3, number // 20)):
        fn()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        best = min(best, (time.perf_counter() - start) / number)
    return best


def tiny_op_overheads(number: int, repeat: int) -> list[tuple[str, float, float]]:
    rows = []
    for name, make in [
        ("add 4x4", lambda d: (lambda a=torch.randn(4, 4, device=d), b=torch.randn(4, 4, device=d): a + b)),
        ("mul 4x4", lambda d: (lambda a=torch.randn(4, 4, device=d), b=torch.randn(4, 4, device=d): a * b)),
        ("add_ 4x4", lambda d: (lambda a=torch.randn(4, 4, device=d), b=torch.randn(4, 4, device=d): a.add_(b))),
        ("sum 4x4", lambda d: (lambda a=torch.randn(4, 4, device=d): a.sum())),
        ("t() view", lambda d: (lambda a=torch.randn(4, 4, device=d): a.t())),
    ]:
        cpu = best_time(make("cpu"), number, repeat)
        neuron = best_time(make("neuron"), number, repeat)
        rows.append((name, cpu * 1e6, neuron * 1e6))
    return rows


def mlp():
    return nn.Sequential(nn.Linear(512, 1024), nn.GELU(), nn.Linear(1024, 1024), nn.GELU(), nn.Linear(1024, 10)), \
        (lambda d: (torch.randn(64, 512, device=d), torch.randint(0, 10, (64,), device=d)))


def transformer():
    layer = nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024, batch_first=True, dropout=0.0)
    model = nn.Sequential(nn.TransformerEncoder(layer, num_layers=2), nn.Flatten(), nn.Linear(256 * 64, 10))
    return model, (lambda d: (torch.randn(16, 64, 256, device=d), torch.randint(0, 10, (16,), device=d)))


def convnet():
    model = nn.Sequential(
        nn.Conv2d(3, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(64, 10))
    return model, (lambda d: (torch.randn(32, 3, 32, 32, device=d), torch.randint(0, 10, (32,), device=d)))


def step_time(factory, device: str, number: int, repeat: int) -> float:
    torch.manual_seed(0)
    model, make_batch = factory()
    model = model.to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = make_batch(device)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()

    return best_time(step, number, repeat)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    torch.set_num_threads(1)  # the machine is shared; one thread keeps the ratios stable
    print("Per-op time on tiny tensors (best of repeats, microseconds)")
    print(f"{'op':<10} {'cpu':>8} {'neuron':>8} {'overhead':>9}")
    for name, cpu, neuron in tiny_op_overheads(args.number, args.repeat):
        print(f"{name:<10} {cpu:8.2f} {neuron:8.2f} {neuron - cpu:+9.2f}")
    print("\nTraining step (AdamW), best of repeats, milliseconds")
    print(f"{'model':<12} {'cpu':>8} {'neuron':>8} {'ratio':>6}")
    for name, factory in [("mlp", mlp), ("transformer", transformer), ("convnet", convnet)]:
        cpu = step_time(factory, "cpu", args.steps, args.repeat)
        neuron = step_time(factory, "neuron", args.steps, args.repeat)
        print(f"{name:<12} {cpu * 1e3:8.2f} {neuron * 1e3:8.2f} {neuron / cpu:6.2f}")


if __name__ == "__main__":
    main()
