"""Shared by the tests/test_hf_*.py files: skip cleanly without the `hf` extra, and tiny offline models."""
import importlib.util

import pytest

HF_EXTRA = ("transformers", "accelerate", "peft", "trl", "diffusers", "safetensors", "tokenizers")


def require(*libraries: str) -> None:
    """Skips the calling test module when a library of the `hf` extra is missing."""
    missing = [name for name in libraries if importlib.util.find_spec(name) is None]
    if missing:
        pytest.skip(f"the Hugging Face extra is not installed (missing {', '.join(missing)}); "
                    "install it with `pip install -c scripts/constraints.txt -e .[hf]`", allow_module_level=True)


def tiny_llama_config(**overrides):
    from transformers import LlamaConfig

    sizes = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, vocab_size=128, max_position_embeddings=128, eos_token_id=None,
                 pad_token_id=0, bos_token_id=1)
    return LlamaConfig(**{**sizes, **overrides})


def tiny_llama(seed: int = 0, **overrides):
    import torch
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_llama_config(**overrides)).eval()


EXAMPLES = __import__("pathlib").Path(__file__).resolve().parents[2] / "examples" / "hf"


# what torch itself keeps in the temporary directory: torchrun's logs (also under `accelerate launch`; torch
# never removes them) and Inductor's cache root (persistent by design, shared by every run of the user)
TORCH_OWNED_TEMPORARIES = ("torchelastic_", "torchinductor_")


def _environment(scratch: str, env: dict | None) -> dict:
    import os

    return {**os.environ, "TORCH_NEURONX_LOG_LEVEL": "0", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "TMPDIR": scratch, **(env or {})}


def _run_in_scratch(argv: list[str], env: dict | None, timeout: int, cwd=None):
    """Runs a command (bounded in time) with a temporary directory of its own as TMPDIR; returns the completed
    process and what the command left in that directory."""
    import os
    import subprocess
    import tempfile

    from process_tree import kill_tree

    with tempfile.TemporaryDirectory(prefix="hf-run-") as scratch:
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   env=_environment(scratch, env), cwd=cwd)
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            # the launcher with its ranks: they run in sessions of their own and hold its pipes
            kill_tree(process.pid)
            stdout, stderr = process.communicate()
            raise AssertionError(f"{argv} did not finish within {timeout} s; its processes were killed. Its output:\n"
                                 f"{stdout[-3000:]}\n{stderr[-5000:]}") from None
        left_behind = sorted(name for name in os.listdir(scratch) if not name.startswith(TORCH_OWNED_TEMPORARIES))
    return subprocess.CompletedProcess(argv, process.returncode, stdout, stderr), left_behind


def run_script(argv: list[str], env: dict | None = None, timeout: int = 300, cwd=None) -> list[dict]:
    """Runs a command in fresh processes and returns the `RESULT {json}` line of each rank, ordered by rank.
    Fails with the command's output when it fails or leaves temporary files behind."""
    import json

    done, left_behind = _run_in_scratch(argv, env, timeout, cwd)
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    assert not left_behind, f"{argv} left temporary files behind: {left_behind}"
    # Ranks share one stdout: print() writes the line and its newline separately, so two ranks' results
    # can land on one line. Each result is read as the one JSON object after its marker.
    decoder = json.JSONDecoder()
    results = [decoder.raw_decode(chunk.lstrip())[0] for chunk in done.stdout.split("RESULT ")[1:]]
    assert results, f"{argv} printed no RESULT line:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return sorted(results, key=lambda result: result.get("rank", 0))


def accelerate_launch(processes: int, script, *args: str, env: dict | None = None, timeout: int = 300):
    import sys

    from distributed_launcher import free_port

    argv = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", str(processes),
            "--num_machines", "1", "--dynamo_backend", "no", "--main_process_port", str(free_port()),
            "--mixed_precision", "no", str(script), *args]
    return run_script(argv, env=env, timeout=timeout)


def torchrun(processes: int, script, *args: str, env: dict | None = None, timeout: int = 300):
    import sys

    from distributed_launcher import free_port

    argv = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes),
            "--master_addr", "127.0.0.1", "--master_port", str(free_port()), str(script), *args]
    return run_script(argv, env=env, timeout=timeout)


def python_script(script, *args: str, env: dict | None = None, timeout: int = 300):
    import sys

    return run_script([sys.executable, str(script), *args], env=env, timeout=timeout)


def failing_python_script(script, *args: str, env: dict | None = None, timeout: int = 300) -> str:
    """The standard error of a script run that must fail (and clean up after itself all the same)."""
    import sys

    done, left_behind = _run_in_scratch([sys.executable, str(script), *args], env, timeout)
    assert done.returncode != 0, f"{script} {args} was expected to fail:\n{done.stdout[-3000:]}"
    assert not left_behind, f"{script} {args} left temporary files behind: {left_behind}"
    return done.stderr
