"""Blocking host syncs, by the user's call site: on Trainium each one drains the device queue, so a
training step wants as few as possible (docs/asynchronous-execution.md: execution is asynchronous until the host reads).

The C++ core calls observe() wherever the host waits for device data, and the device's copy kernels reach record()
for a blocking copy within the device; copies made by the runtime itself (the CPU fallback moving its inputs, a
decomposition's casts) are not the user's syncs and are skipped.
"""
import sys

from localneuron.runtime import call_sites

# the first two: csrc/profiler/trace_plugin.h HostSync; the third: csrc/aten/blocking_copies.h's, recorded by
# localneuron/device/streams.py
KINDS = ("scalar read (.item(), bool(), int(), float(), `if tensor:`)", "copy to host (.cpu(), .numpy(), .tolist())",
         "blocking copy within the device (copy_, .to(dtype) without non_blocking=True)")
BLOCKING_DEVICE_COPY = 2
PRINT = "print / str of a tensor"
_RUNTIME_PATHS = ("localneuron/ops/", "localneuron/compiler/", "localneuron/distributed/", "localneuron/nki/")
_PRINTING = "torch/_tensor_str.py"


NO_PYTHON_CALLER = "(no Python caller: the autograd engine's thread)"

# what a frame's file is to the walk below, decided once per file: a sync may sit under a deep stack of
# library frames (a serving engine syncs once per step from ~40 frames down)
USER, LIBRARY, RUNTIME, PRINTING = range(4)
_role_of_file: dict[str, int] = {}


def _role(filename: str) -> int:
    role = _role_of_file.get(filename)
    if role is None:
        if not call_sites.is_library(filename):
            role = USER
        elif any(p in filename for p in _RUNTIME_PATHS):
            role = RUNTIME
        elif filename.endswith(_PRINTING):
            role = PRINTING
        else:
            role = LIBRARY
        _role_of_file[filename] = role
    return role


def observe(kind: int) -> None:
    """The C++ core's report of a host sync of kind `kind` (csrc/profiler/trace_plugin.h HostSync), from the
    innermost Python frame of the thread that waits."""
    record(kind, sys._getframe(0).f_back)


def record(kind: int, frame) -> bool:
    """Counts a sync of kind `kind` at the user's call site above `frame` (None: the autograd engine's thread); False,
    counting nothing, when the runtime itself made it."""
    what = KINDS[kind]
    walk = frame  # out to the innermost user frame, where the site starts
    while walk is not None:
        role = _role(walk.f_code.co_filename)
        if role == USER:
            break
        if role == RUNTIME:
            return False
        if role == PRINTING:
            what = PRINT
        walk = walk.f_back
    site = NO_PYTHON_CALLER if frame is None else call_sites.user_site(walk) or "(library code only)"
    call_sites.record(call_sites.HOST_SYNC, what, site)
    return True
