"""Interpreter exit with autograd device threads still holding a finished backward pass.

PyTorch stashes a Python object (the contextvars context) in the thread-local state of every backward
pass. The autograd thread of a device drops its reference to a finished pass a moment after the
caller has been woken; if the interpreter is already finalizing by then, the thread needs the GIL to
free that object and the process aborts ("terminate called without an active exception"). Before
finalization, one tiny backward per device, built in C++ (so it carries no Python state), waits
until each device thread has let go of the previous pass.
"""
import atexit
import sys

from localneuron import _C
from localneuron.device import neuron_module


def drain_autograd_device_threads() -> None:
    # A forked child has no autograd threads of its own, and may not touch the device.
    if _C.runtime_initialized() and not neuron_module._is_in_bad_fork():
        _C.drain_autograd_device_threads()


def finish_queued_work() -> None:
    """Queued ops complete before the interpreter goes away (their tensors may own Python objects); an
    error among them that no synchronisation point reported yet is reported here."""
    error = None
    try:
        _C.synchronize_all()
    except RuntimeError as e:
        error = e
    _C.shutdown_queues()
    if error is not None:
        print(f"localneuron: at exit, {error}", file=sys.stderr)


def register() -> None:
    atexit.register(drain_autograd_device_threads)
    atexit.register(finish_queued_work)  # atexit runs it first
