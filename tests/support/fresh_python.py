"""A fresh interpreter for import-time and environment behaviour. Lives here, not in conftest, because test
modules that use it are also imported outside pytest (by distributed_launcher's ranks and by subprocesses)."""
import os
import subprocess
import sys


def run_python(code: str, env: dict | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, env=full_env,
                          timeout=timeout)


def interruptible(argv: list, **popen_kwargs) -> subprocess.Popen:
    """Starts argv with SIGINT at its default action, as a terminal's Ctrl-C finds a program, even when this process
    ignores it: a suite launched as a background job of a non-interactive shell (`cmd &`) ignores SIGINT, an
    exec keeps an ignored signal ignored, and Python then installs no KeyboardInterrupt handler in the child.
    (A Python-level handler is reset to the default at exec; only an ignored signal is inherited.)"""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(argv, **popen_kwargs)
    finally:
        signal.signal(signal.SIGINT, previous)
