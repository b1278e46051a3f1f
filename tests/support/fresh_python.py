"""A fresh interpreter for import-time and environment behaviour. Lives here, not in conftest, because test
modules that use it are also imported outside pytest (by distributed_launcher's ranks and by subprocesses)."""
import os
import subprocess
import sys


def run_python(code: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=full_env,
                          timeout=timeout)
