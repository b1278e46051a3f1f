"""Blocking host syncs, by the user's call site: on Trainium each one drains the device queue, so a
training step wants as few as possible (contract §5: execution is asynchronous until the host reads).

The C++ core calls observe() wherever the host waits for device data; copies made by the runtime
itself (the CPU fallback moving its inputs) are not the user's syncs and are skipped.
"""
import sys

from localneuron.runtime import call_sites

# csrc/trace_plugin.h HostSync
KINDS = ("scalar read (.item(), bool(), int(), float(), `if tensor:`)", "copy to host (.cpu(), .numpy(), .tolist())")
PRINT = "print / str of a tensor"
_RUNTIME_PATHS = ("localneuron/ops/", "localneuron/compiler/", "localneuron/distributed/", "localneuron/nki/")
_PRINTING = "torch/_tensor_str.py"


NO_PYTHON_CALLER = "(no Python caller: the autograd engine's thread)"


def observe(kind: int) -> None:
    frame = sys._getframe(0).f_back  # None when the C++ autograd engine copies on its own thread
    what = KINDS[kind]
    walk = frame
    while walk is not None and call_sites.is_library(walk.f_code.co_filename):
        filename = walk.f_code.co_filename
        if any(p in filename for p in _RUNTIME_PATHS):
            return
        if filename.endswith(_PRINTING):
            what = PRINT
        walk = walk.f_back
    site = NO_PYTHON_CALLER if frame is None else call_sites.user_site(frame) or "(library code only)"
    call_sites.record(call_sites.HOST_SYNC, what, site)
