"""A stress program for the device queue's ordering rule (csrc/queue/stream_order.h): many Python threads issue
on shared and private streams, free what they issued while it is still queued, move tensors between streams,
and read results on the host; every result read must have the bits the CPU computes for the same program.

What it provokes: queue entries appended while the stream's queue is full (issuing threads wait for room), blocks
freed while queued work still reads them (reused at once on their stream, returned to the host, or handed to
another stream), host-made results (masked_select) that go back to the host allocator when freed, tensors above
glibc's mmap threshold (their bytes are unmapped when freed), and sealed Adaptive Eager runs when fusion is on.

    python tests/support/ordering_stress.py --seconds 20 --threads 6 [--seed 0]

prints one line `ordering stress: N checks, M mismatches, ...` and exits 1 on a mismatch (each one is printed), 0
otherwise. A crash (a worker reading unmapped memory) ends the process with a signal.
"""
import argparse
import os
import random
import sys
import threading
import time

# streams of their own (without host collective communication TorchNeuron's new streams are its default stream)
os.environ["NEURON_RT_ENABLE_HOST_CC"] = "1"
import torch  # noqa: E402

import localneuron  # noqa: F401,E402  (the device)

LARGE = 9 * 1024 * 1024  # float32 elements: 36 MiB, above glibc's largest mmap threshold (32 MiB)


class Checks:
    def __init__(self):
        self.lock = threading.Lock()
        self.count = 0
        self.mismatches: list[str] = []
        self.errors: list[str] = []

    def compare(self, what: str, device_result: torch.Tensor, cpu_result: torch.Tensor) -> None:
        got = device_result.cpu()
        same = got.dtype == cpu_result.dtype and got.shape == cpu_result.shape and torch.equal(
            got.view(torch.int32) if got.dtype == torch.float32 else got,
            cpu_result.view(torch.int32) if cpu_result.dtype == torch.float32 else cpu_result)
        with self.lock:
            self.count += 1
            if not same:
                bad = (got != cpu_result).nonzero()[:4].flatten().tolist() if got.shape == cpu_result.shape else "shape"
                self.mismatches.append(f"{what}: {got.shape} {got.dtype}; first differing indices {bad}; "
                                       f"got {got.flatten()[:4].tolist()}, the CPU {cpu_result.flatten()[:4].tolist()}")


def chain(x, mask):
    """One step's ops, the same on both devices: a host-made result (masked_select), queued element-wise work on
    it after the host-made result is dropped, a matmul, an in-place update of a view."""
    selected = torch.masked_select(x, mask)
    y = (selected * 2.5).sin()
    del selected  # freed while the queued ops above may still read it
    z = y.add(1.0).mul_(0.5)
    del y
    square = x[:64 * 64].reshape(64, 64)
    w = (square @ square.t()).relu()
    w[:8].mul_(-1.0)
    return z, w


def worker(index: int, seed: int, deadline: float, streams: list, checks: Checks, large: bool) -> None:
    rng = random.Random(seed * 1000 + index)
    gen = torch.Generator().manual_seed(seed * 1000 + index)
    own = torch.neuron.Stream()
    step = 0
    try:
        while time.monotonic() < deadline:
            step += 1
            n = LARGE if large and index < 2 and step % 4 == 1 else rng.choice((4096, 6000, 20000))
            x = torch.randn(n, generator=gen)
            mask = x > rng.choice((-0.5, 0.0, 0.7))
            where = rng.random()
            stream = streams[index % len(streams)] if where < 0.6 else own if where < 0.8 else None
            if stream is None:  # made on a shared stream, used on this thread's own stream
                shared = streams[rng.randrange(len(streams))]
                with torch.neuron.stream(shared):
                    xd = x.to("neuron")
                    md = mask.to("neuron")
                own.wait_stream(shared)
                with torch.neuron.stream(own):
                    xd.record_stream(own)
                    md.record_stream(own)
                    z, w = chain(xd, md)
                del xd, md  # freed while the own stream's queued work reads them
                zc, wc = chain(x, mask)
                with torch.neuron.stream(own):
                    checks.compare(f"thread {index} step {step} across streams z", z, zc)
                    checks.compare(f"thread {index} step {step} across streams w", w, wc)
                del z, w
                continue
            with torch.neuron.stream(stream):
                xd, md = x.to("neuron"), mask.to("neuron")
                z, w = chain(xd, md)
                del xd, md
                keep = [z, w]
                for _ in range(rng.randrange(0, 4)):  # more queued work on the stream before the host reads
                    keep.append(keep[-1] * 1.0)
                del keep
                zc, wc = chain(x, mask)
                checks.compare(f"thread {index} step {step} z ({n} elements)", z, zc)
                checks.compare(f"thread {index} step {step} w", w, wc)
    except Exception as error:  # noqa: BLE001  (reported with the thread that raised it)
        with checks.lock:
            checks.errors.append(f"thread {index}: {type(error).__name__}: {error}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--shared-streams", type=int, default=2, help="streams the threads share (the default one first)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--large", action="store_true", help="every fourth step of the first two threads uses a 36 MiB tensor")
    args = parser.parse_args(argv)
    streams = [torch.neuron.current_stream()] + [torch.neuron.Stream() for _ in range(args.shared_streams - 1)]
    checks = Checks()
    deadline = time.monotonic() + args.seconds
    threads = [threading.Thread(target=worker, args=(i, args.seed, deadline, streams, checks, args.large))
               for i in range(args.threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    torch.neuron.synchronize()
    for line in checks.mismatches + checks.errors:
        print(line)
    print(f"ordering stress: {checks.count} checks, {len(checks.mismatches)} mismatches, {len(checks.errors)} errors "
          f"({args.threads} threads, {args.shared_streams} shared streams, {args.seconds:g} s, seed {args.seed})")
    return 1 if checks.mismatches or checks.errors else 0


if __name__ == "__main__":
    sys.exit(main())
