"""What observing a run costs on the example GPT (examples/train_gpt.py), as ratios measured in one run:

- the report's source attribution (always on: call sites of fallbacks, 64-bit routes, recompiles, host
  syncs, and the sampled estimated device time by source line), against the same steps with it switched off (target: at most 5% of step time);
- torch.profiler with every neuron layer (framework ops with shapes, runtime events, the estimated
  device timeline), around the same steps including the profiler's stop and trace building, against
  no profiler (target: at most 1.5x); with Python stacks (with_stack=True) as well, for reference.

Run by hand: `python benchmarks/profiling_overhead.py`. Steps alternate between the variants and each
variant keeps its best sample, so drift on a shared machine hits all of them alike. Because a few
percent is within that noise, the attribution's cost is also measured directly: the time spent inside
its hooks during the steps.
"""
import argparse
import importlib.util
import sys
import time
from contextlib import nullcontext
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from localneuron import _C
from localneuron.profiler import line_time
from localneuron.runtime import call_sites, host_syncs

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_gpt.py"


def load_example():
    spec = importlib.util.spec_from_file_location("train_gpt", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_steps(gpt, batch: int):
    torch.manual_seed(0)
    model = gpt.GPT().to("neuron")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    batches = [(x.to("neuron"), y.to("neuron")) for x, y in gpt.synthetic_batches(8, batch, 64, 256)]

    def steps(n: int) -> None:
        for i in range(n):
            x, y = batches[i % len(batches)]
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            loss.item()

    return steps


class attribution_off:
    def __enter__(self):
        self.record = call_sites.record
        call_sites.record = lambda *a, **k: None
        _C.set_host_sync_observer(None)
        line_time.uninstall()

    def __exit__(self, *exc):
        call_sites.record = self.record
        _C.set_host_sync_observer(host_syncs.observe)
        line_time.install()


class hooks_timed:
    """Attribution on, with the time spent inside its Python hooks added up (the source-line samples the
    C++ sampler credits itself are not in it: the on/off comparison covers them)."""
    seconds = 0.0

    def __enter__(self):
        self.record = call_sites.record
        self.observing = False

        def record(category, what, site=None, count=1):
            start = time.perf_counter()
            self.record(category, what, site or call_sites.user_site(sys._getframe(1)), count)
            if not self.observing:  # a sync's record is inside observe(), already timed
                hooks_timed.seconds += time.perf_counter() - start

        def observe(kind):
            start = time.perf_counter()
            self.observing = True
            host_syncs.observe(kind)
            self.observing = False
            hooks_timed.seconds += time.perf_counter() - start

        def sample(credited_ns):
            start = time.perf_counter()
            line_time.credit(credited_ns, sys._getframe(0).f_back)
            hooks_timed.seconds += time.perf_counter() - start

        call_sites.record = record
        _C.set_host_sync_observer(observe)
        _C.set_line_sampler(sample, line_time.mean_gap_ns(), call_sites.is_library)

    def __exit__(self, *exc):
        call_sites.record = self.record
        _C.set_host_sync_observer(host_syncs.observe)
        line_time.install()


def timed(steps, n: int, context) -> tuple[float, float]:
    """(wall seconds, this process's CPU seconds) per step; CPU time is far less sensitive to other
    processes on a shared machine."""
    start, start_cpu = time.perf_counter(), time.process_time()
    with context():
        steps(n)
    return (time.perf_counter() - start) / n, (time.process_time() - start_cpu) / n


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="steps per sample")
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    steps = make_steps(load_example(), args.batch)
    steps(3)  # warm-up: every executable compiled
    variants = {
        "attribution on (default)": nullcontext,
        "attribution off": attribution_off,
        "torch.profiler, all neuron layers": lambda: profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], record_shapes=True),
        "torch.profiler, all layers + with_stack": lambda: profile(
            activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1], record_shapes=True, with_stack=True),
        "torch.profiler, CPU activity only": lambda: profile(  # PyTorch's own cost, for reference
            activities=[ProfilerActivity.CPU], record_shapes=True),
    }
    samples = {name: [] for name in variants}
    for _ in range(args.samples):
        for name, context in variants.items():
            samples[name].append(timed(steps, args.steps, context))
    best = {name: min(w for w, _ in s) for name, s in samples.items()}
    best_cpu = {name: min(c for _, c in s) for name, s in samples.items()}
    base, base_cpu = best["attribution on (default)"], best_cpu["attribution on (default)"]
    print(f"example GPT step ({args.batch} sequences of 64 tokens), best of {args.samples} samples of "
          f"{args.steps} steps (wall; process CPU):")
    for name, seconds in best.items():
        print(f"  {name:<42} {seconds * 1e3:8.2f} ms/step  {seconds / base:5.2f}x;  "
              f"{best_cpu[name] * 1e3:8.2f} ms/step  {best_cpu[name] / base_cpu:5.2f}x")
    off = best["attribution off"]
    off_cpu = best_cpu["attribution off"]
    print(f"source attribution, step time on vs off: {100 * (base - off) / off:+.1f}% wall, "
          f"{100 * (base_cpu - off_cpu) / off_cpu:+.1f}% CPU (target <= 5%)")
    hooks_timed.seconds = 0.0
    inside, _ = timed(steps, args.steps * args.samples, hooks_timed)
    per_step = hooks_timed.seconds / (args.steps * args.samples)
    print(f"source attribution, time inside its hooks: {per_step * 1e3:.3f} ms/step = "
          f"{100 * per_step / inside:.2f}% of step time")
    print(f"profiling overhead: {best['torch.profiler, all neuron layers'] / base:.2f}x wall, "
          f"{best_cpu['torch.profiler, all neuron layers'] / base_cpu:.2f}x CPU (target <= 1.5x); with stacks "
          f"{best['torch.profiler, all layers + with_stack'] / base:.2f}x wall; PyTorch's CPU-only profiler "
          f"{best_cpu['torch.profiler, CPU activity only'] / base_cpu:.2f}x CPU")


if __name__ == "__main__":
    main()
