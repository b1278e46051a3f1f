"""Interpreter exit: queued work finishes first, and a failure in it that no thread was told of fails the process;
autograd device threads let go of their last backward pass.

PyTorch stashes a Python object (the contextvars context) in the thread-local state of every backward
pass. The autograd thread of a device drops its reference to a finished pass a moment after the
caller has been woken; if the interpreter is already finalizing by then, the thread needs the GIL to
free that object and the process aborts ("terminate called without an active exception"). Before
finalization, one tiny backward per device, built in C++ (so it carries no Python state), waits
until each device thread has let go of the previous pass.
"""
import atexit
import os
import sys

from localneuron import _C
from localneuron.device import neuron_module


def _autograd_device_threads_started() -> bool:
    """Whether PyTorch's autograd engine has started its device threads ("pt_autograd_N"): it starts them at the
    first backward pass of the process, whatever its tensors' device, and a backward on fake `neuron` tensors
    (`localneuron estimate`) runs on them without initializing the device. Where threads cannot be listed, True."""
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return True
    for task in tasks:
        try:
            with open(f"/proc/self/task/{task}/comm") as comm:
                if comm.read().startswith("pt_autograd_"):
                    return True
        except OSError:
            continue  # the thread ended meanwhile
    return False


def drain_autograd_device_threads() -> None:
    # A forked child has no autograd threads of its own, and may not touch the device.
    if neuron_module._is_in_bad_fork():
        return
    if _C.runtime_initialized() or _autograd_device_threads_started():
        _C.drain_autograd_device_threads()


def report_unreported_failures(when: str) -> bool:
    """Waits for the queued work, prints each failure in it that no thread was told of (its op, signature and line;
    csrc/queue/held_errors.h) and says the process fails for them; whether there was any."""
    _C.drain_all_queues()
    failures = _C.take_unreported_failures()
    for message in failures:
        print(f"localneuron: {when}, {message}", file=sys.stderr)
    if failures:
        print(f"localneuron: exit status 1: {len(failures)} queued op(s) failed and no synchronisation point "
              "reported the failure (NEURON_LAUNCH_BLOCKING=1 raises at the op itself)", file=sys.stderr)
    return bool(failures)


def finish_queued_work() -> None:
    """Queued ops complete before the interpreter goes away (their tensors may own Python objects); a failure among
    them that no synchronisation point reported is reported here, and the process then exits with status 1."""
    failed = report_unreported_failures("at exit")
    _C.shutdown_queues()
    if failed:
        _C.exit_with_status_one_when_finalized()


def register() -> None:
    atexit.register(drain_autograd_device_threads)
    atexit.register(finish_queued_work)  # atexit runs it first
