"""What observing a run costs on the example GPT (examples/train_gpt.py), as ratios measured in one run:

- the report's source attribution (always on: call sites of fallbacks, 64-bit routes, recompiles, host
  syncs, and the sampled estimated device time by source line), against the same steps with it switched
  off (target: at most 5% of step time);
- torch.profiler, layer by layer: PyTorch's own CPU profiler (default options, record_shapes, with_stack),
  then every neuron layer on top of it (ProfilerActivity.PrivateUse1: runtime events and the estimated
  device timeline) with the framework layer as the user configures it (target: all layers at most 1.5x
  the unprofiled run). Each sample is a whole profiled run: the profiler's start, the steps and its stop,
  where PyTorch and the neuron layers build the trace's events; key_averages() and export_chrome_trace()
  are timed apart (after the run, outside the measured window).

Run by hand: `python benchmarks/profiling_overhead.py`. Variants alternate round robin, sample after sample,
so drift on a shared machine hits all of them alike; the ratios are of medians of this process's CPU time
(all its threads), which other processes disturb far less than wall time (its best sample is shown too,
with the load average). Because a few percent is within that noise, the attribution's cost is also
measured directly: the time spent inside its hooks during the steps.
"""
import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

from localneuron import _C
from localneuron.runtime import call_sites, host_syncs, line_time

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


def _observer_body(name: str | None):
    """The host-sync observer is installed once, at registration (csrc/profiler/trace_plugin.cpp refuses a second
    one), so the benchmark switches the installed function's body: to a no-op (name None), or to a call of
    host_syncs.<name>, a function the benchmark puts in that module; returns the body to restore."""
    saved = host_syncs.observe.__code__
    host_syncs.observe.__code__ = (lambda kind: None).__code__ if name is None else \
        compile(f"def observe(kind):\n    {name}(kind)\n", host_syncs.__file__, "exec").co_consts[0]
    return saved


class attribution_off:
    def __enter__(self):
        self.record = call_sites.record
        call_sites.record = lambda *a, **k: None
        self.observer = _observer_body(None)
        line_time.uninstall()

    def __exit__(self, *exc):
        call_sites.record = self.record
        host_syncs.observe.__code__ = self.observer
        line_time.install()


class hooks_timed:
    """Attribution on, with the time spent inside its Python hooks added up (the source-line samples the
    C++ sampler credits itself are not in it: the on/off comparison covers them)."""
    seconds = 0.0

    def __enter__(self):
        self.record = call_sites.record
        self.observing = False
        observe = type(host_syncs.observe)(host_syncs.observe.__code__, host_syncs.__dict__)

        def record(category, what, site=None, count=1):
            start = time.perf_counter()
            self.record(category, what, site or call_sites.user_site(sys._getframe(1)), count)
            if not self.observing:  # a sync's record is inside observe(), already timed
                hooks_timed.seconds += time.perf_counter() - start

        def timed_observe(kind):
            start = time.perf_counter()
            self.observing = True
            observe(kind)
            self.observing = False
            hooks_timed.seconds += time.perf_counter() - start

        def sample(credited_ns):
            start = time.perf_counter()
            line_time.credit(credited_ns, sys._getframe(0).f_back)
            hooks_timed.seconds += time.perf_counter() - start

        call_sites.record = record
        host_syncs._benchmark_observe = timed_observe
        self.observer = _observer_body("_benchmark_observe")
        _C.set_line_sampler(sample, line_time.mean_gap_ns(), line_time.bounded_cost())

    def __exit__(self, *exc):
        call_sites.record = self.record
        host_syncs.observe.__code__ = self.observer
        del host_syncs._benchmark_observe
        line_time.install()


UNPROFILED = "unprofiled (attribution on, the default)"
ALL_LAYERS = "all neuron layers (CPU + PrivateUse1)"
ALL_LAYERS_SHAPES = "all neuron layers + record_shapes"


def profiled(activities, **options):
    return lambda: profile(activities=activities, **options)


CPU, DEVICE = [ProfilerActivity.CPU], [ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]
VARIANTS = {
    UNPROFILED: None,
    "attribution off": attribution_off,
    "PyTorch CPU profiler": profiled(CPU),
    "PyTorch CPU profiler + record_shapes": profiled(CPU, record_shapes=True),
    "PyTorch CPU profiler + shapes + with_stack": profiled(CPU, record_shapes=True, with_stack=True),
    ALL_LAYERS: profiled(DEVICE),
    ALL_LAYERS_SHAPES: profiled(DEVICE, record_shapes=True),
    "all neuron layers + shapes + with_stack": profiled(DEVICE, record_shapes=True, with_stack=True),
}


def sample(steps, n: int, context) -> tuple[float, float, float]:
    """(wall seconds, this process's CPU seconds) per step of a whole run (the profiler's start and stop
    included), and the CPU seconds of the stop alone (where the trace's events are built)."""
    start, start_cpu = time.perf_counter(), time.process_time()
    ctx = context() if context is not None else None
    if ctx is not None:
        ctx.__enter__()
    steps(n)
    stop_cpu = time.process_time()
    if ctx is not None:
        ctx.__exit__(None, None, None)
    end_cpu = time.process_time()
    sample.last = ctx
    return (time.perf_counter() - start) / n, (end_cpu - start_cpu) / n, end_cpu - stop_cpu


def cpu_seconds(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5, help="steps per sample (one profiled run)")
    parser.add_argument("--samples", type=int, default=7)
    parser.add_argument("--batch", type=int, default=8)
    args = parser.parse_args()
    steps = make_steps(load_example(), args.batch)
    steps(3)  # warm-up: every executable compiled
    load_before = os.getloadavg()
    samples = {name: [] for name in VARIANTS}
    exports = {}
    for _ in range(args.samples):
        for name, context in VARIANTS.items():
            samples[name].append(sample(steps, args.steps, context))
            if isinstance(sample.last, profile):
                with tempfile.TemporaryDirectory() as out:
                    exports.setdefault(name, []).append((
                        cpu_seconds(sample.last.key_averages),
                        cpu_seconds(lambda: sample.last.export_chrome_trace(os.path.join(out, "trace.json")))))
    load_after = os.getloadavg()
    wall = {name: min(w for w, _, _ in s) for name, s in samples.items()}
    cpu = {name: statistics.median(c for _, c, _ in s) for name, s in samples.items()}
    stop = {name: statistics.median(x for _, _, x in s) for name, s in samples.items()}
    base_wall, base = wall[UNPROFILED], cpu[UNPROFILED]
    print(f"example GPT step ({args.batch} sequences of 64 tokens), {args.samples} samples of {args.steps} steps "
          f"per variant, round robin; NEURON_LAUNCH_BLOCKING={os.environ.get('NEURON_LAUNCH_BLOCKING', '(default)')}; "
          f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after")
    print(f"  {'':<44} {'CPU ms/step (median)':>22} {'of which stop':>14} {'wall ms/step (best)':>22} "
          f"{'key_averages ms':>16} {'export ms':>10}")
    for name in VARIANTS:
        key_avg, export = (statistics.median(x) * 1e3 for x in zip(*exports[name])) if name in exports else ("", "")
        print(f"  {name:<44} {cpu[name] * 1e3:9.2f} {cpu[name] / base:5.2f}x {stop[name] * 1e3 / args.steps:8.2f}    "
              f"{wall[name] * 1e3:9.2f} {wall[name] / base_wall:5.2f}x      "
              + (f"{key_avg:10.1f} {export:10.1f}" if key_avg != "" else ""))
    off = cpu["attribution off"]
    print(f"source attribution, step time on vs off: {100 * (base - off) / off:+.1f}% CPU, "
          f"{100 * (base_wall - wall['attribution off']) / wall['attribution off']:+.1f}% wall (target <= 5%)")
    hooks_timed.seconds = 0.0
    line_time.clear()
    inside, _, _ = sample(steps, args.steps * args.samples, hooks_timed)
    per_step = hooks_timed.seconds / (args.steps * args.samples)
    credited = sum(line_time.by_line().values()) / (args.steps * args.samples)
    gap = line_time.mean_gap_ns()
    samples_note = (f"{credited / (gap * 1e-9):.1f} samples/step, one per {gap / 1e3:.0f} us of estimated device "
                    "time on average" if gap else "every op (mean gap 0)")
    print(f"source attribution, time inside its Python hooks: {per_step * 1e3:.3f} ms/step = "
          f"{100 * per_step / inside:.2f}% of step time; the C++ source-line sampler took {samples_note} "
          f"({credited * 1e3:.2f} ms of estimated device time per step)")
    pytorch = cpu["PyTorch CPU profiler + record_shapes"]
    print(f"profiling overhead, all layers: {cpu[ALL_LAYERS] / base:.2f}x CPU with PyTorch's default options "
          f"(PyTorch alone {cpu['PyTorch CPU profiler'] / base:.2f}x), {cpu[ALL_LAYERS_SHAPES] / base:.2f}x with "
          f"record_shapes (PyTorch alone {pytorch / base:.2f}x) (target <= 1.5x); the neuron layers add "
          f"{(cpu[ALL_LAYERS] - cpu['PyTorch CPU profiler']) * 1e3:.2f} / {(cpu[ALL_LAYERS_SHAPES] - pytorch) * 1e3:.2f} "
          "ms/step")


if __name__ == "__main__":
    main()
