"""Interpreter exit with autograd device threads still holding a finished backward pass.

PyTorch stashes a Python object (the contextvars context) in the thread-local state of every backward
pass. The autograd thread of a device drops its reference to a finished pass a moment after the
caller has been woken; if the interpreter is already finalizing by then, the thread needs the GIL to
free that object and the process aborts ("terminate called without an active exception"). Before
finalization, one tiny backward per device, built in C++ (so it carries no Python state), waits
until each device thread has let go of the previous pass.
"""
import atexit

from localneuron import _C
from localneuron.device import neuron_module


def drain_autograd_device_threads() -> None:
    # A forked child has no autograd threads of its own, and may not touch the device.
    if _C.runtime_initialized() and not neuron_module._is_in_bad_fork():
        _C.drain_autograd_device_threads()


def register() -> None:
    atexit.register(drain_autograd_device_threads)
