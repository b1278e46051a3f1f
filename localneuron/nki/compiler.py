"""`nki.compiler`: options for AWS's NKI compiler.

The simulator runs kernels as Python, so compiler options change nothing it models: `CompileConfig`
(passed as `@nki.jit(compile_config=...)`) is accepted and kept on the kernel, and the legacy decorators
`skip_middle_end_transformations` / `enable_stack_allocator` return the kernel unchanged. The capacity of
SBUF/PSUM is still enforced (see memory.py), which is what a failing allocation would report.
"""
from dataclasses import dataclass


@dataclass
class CompileConfig:
    address_rotation: object = None
    barrier_check: bool = False
    dead_code_elim: bool = True
    nki_alloc_fallback: bool = True
    non_ssa_legalization: bool = False
    prefetch_auto: bool = False


def skip_middle_end_transformations(func=None):
    return func if func is not None else (lambda f: f)


def enable_stack_allocator(func=None, log_level=50):
    return func if func is not None else (lambda f: f)
