"""How long `localneuron estimate` takes, and how much memory it needs, at full model scale: the issue's
case, Llama-3.1-70B training with TP=32, PP=8, DP=4 on 32 trn1 nodes (bound: 60 s on 2 cores, 2 GiB
resident), with each builder.

    python3 benchmarks/estimate_speed.py
"""
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = ["estimate", "--hf-config", str(ROOT / "benchmarks" / "configs" / "llama-3.1-70b.json"), "--target", "trn1",
        "--nodes", "32", "--tp", "32", "--pp", "8", "--dp", "4", "--mode", "train", "--global-batch", "1024"]
BUILDERS = ("localneuron", "transformers")


def measure(builder: str) -> tuple[float, float]:
    """(wall seconds, peak resident GiB) of one estimate in a fresh process."""
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-W", "ignore", "-m", "localneuron.cli.main", *CASE, "--builder", builder],
                          capture_output=True, text=True, cwd=ROOT, timeout=600)
    elapsed = time.perf_counter() - started
    if done.returncode:
        raise SystemExit(f"estimate with --builder {builder} failed:\n{done.stderr}")
    return elapsed, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / (1 << 20)


def main():
    for builder in BUILDERS:
        seconds, gib = measure(builder)   # ru_maxrss of children is the largest so far: builders run in rising order
        print(f"Llama-3.1-70B train tp=32 pp=8 dp=4 on 32 trn1, --builder {builder}: {seconds:.1f} s, "
              f"peak RSS {gib:.2f} GiB (bound 60 s, 2 GiB)")


if __name__ == "__main__":
    main()
