"""Keeps torch.compile out of this package's entry points.

Dynamo compiles any Python frame that starts while a compiled region runs, including the methods C++
calls on a process group (DDP's reducer broadcasting bucket indices, functional collectives waiting on
their work). To Dynamo a process group is an opaque object, so tracing those methods fails outright
("Attempted to access unregistered member on an OpaqueObject"). They are host-side plumbing with
nothing to compile: they run eagerly. Only the entry points are wrapped (public methods and the
private names c10d calls); what they call runs eagerly with them, without paying for another wrapper.
Dynamo itself is imported only once something compiles: until then no frame can be traced, and the
backend's import at `import torch` stays cheap.
"""
import functools
import inspect
import sys

import torch


def _eager(fn):
    disabled = torch._disable_dynamo(fn)  # imports Dynamo on its first call, not now

    @functools.wraps(fn)
    def run(*args, **kwargs):
        if "torch._dynamo" not in sys.modules:
            return fn(*args, **kwargs)
        return disabled(*args, **kwargs)

    return run


def eager_methods(*c10d_private_names: str):
    def wrap(cls):
        for name, value in list(vars(cls).items()):
            if inspect.isfunction(value) and (not name.startswith("_") or name in c10d_private_names):
                setattr(cls, name, _eager(value))
        return cls

    return wrap
