"""The queue's ordering rule at length (csrc/queue/stream_order.h): runs tests/support/ordering_stress.py in fresh
processes, in each execution mode, and counts the processes that saw a result without the CPU's bits, raised, or
crashed. Run by hand (CI runs one short process per mode: tests/execution/test_async_threads.py):

    python benchmarks/queue_ordering_stress.py --processes 16 --seconds 60 --threads 6

Prints one row per mode and exits 1 if any process failed.
"""
import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
STRESS = os.path.join(os.path.dirname(HERE), "tests", "support", "ordering_stress.py")

MODES = {
    "asynchronous": {"NEURON_LAUNCH_BLOCKING": "0"},
    "asynchronous, Adaptive Eager": {"NEURON_LAUNCH_BLOCKING": "0", "TORCH_NEURONX_ENABLE_CONCATENATION": "1"},
    "blocking": {"NEURON_LAUNCH_BLOCKING": "1"},
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", type=int, default=16, help="fresh processes per mode")
    parser.add_argument("--seconds", type=float, default=60.0, help="issuing time of each process")
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--shared-streams", type=int, default=2)
    parser.add_argument("--modes", nargs="*", default=list(MODES), choices=list(MODES))
    args = parser.parse_args()
    failed_any = False
    for mode in args.modes:
        checks = mismatching = raising = crashed = 0
        for seed in range(args.processes):
            done = subprocess.run(
                [sys.executable, STRESS, "--seconds", str(args.seconds), "--threads", str(args.threads),
                 "--shared-streams", str(args.shared_streams), "--seed", str(seed), "--large"],
                capture_output=True, text=True, env={**os.environ, **MODES[mode]}, timeout=args.seconds * 10 + 300)
            summary = [line for line in done.stdout.splitlines() if line.startswith("ordering stress:")]
            if done.returncode < 0 or not summary:
                crashed += 1
                print(f"{mode}, seed {seed}: exit {done.returncode}\n{done.stderr[-2000:]}", file=sys.stderr)
                continue
            fields = summary[0].split()
            checks += int(fields[2])
            mismatching += int(fields[4]) > 0
            raising += int(fields[6]) > 0
            if done.returncode != 0:
                print(f"{mode}, seed {seed}:\n{done.stdout[-2000:]}", file=sys.stderr)
        failed_any = failed_any or mismatching or raising or crashed
        print(f"{mode:30} {args.processes} processes x {args.seconds:g} s, {args.threads} threads: {checks} checks; "
              f"processes with mismatches {mismatching}, with errors {raising}, crashed {crashed}")
    return 1 if failed_any else 0


if __name__ == "__main__":
    sys.exit(main())
