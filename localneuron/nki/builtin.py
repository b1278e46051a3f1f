"""`nki.builtin`: the names the NKI compiler predefines inside every kernel (the language and the ISA).

Kernels here run as Python, so these are simply the `nki.language` and `nki.isa` modules; the module
exists because AWS's simulation setup installs it as the builtin namespace of kernel code.
"""
from . import isa, language  # noqa: F401
