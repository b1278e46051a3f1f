"""Engine registers: scalars a kernel loads from SBUF at run time, used as dynamic loop bounds.

The simulator knows every value, so a register is simply the integer loaded into it; `nl.dynamic_range`
reads a register's value when its loop starts (the hardware re-reads it to test the loop condition,
which the library's while-style loops reload through register_load inside the loop).
"""
import numpy as np

from .. import checks
from ..errors import NkiUsageError, require
from ..run import current_run


class Register:
    """One engine register (32-bit integer)."""

    def __init__(self, index, value=0):
        self.index = index
        self.value = int(value)

    def __int__(self):
        return self.value

    __index__ = __int__

    def __repr__(self):
        return f"<nisa register {self.index} = {self.value}>"


def register_alloc(value=0, name=None):
    run = current_run()
    register = Register(len(run.registers), value)
    run.registers.append(register)
    return register


def _register(op, register):
    if not isinstance(register, Register):
        raise NkiUsageError(f"{op}: expected a register from nisa.register_alloc(), got {type(register).__name__}")
    return register


def register_load(dst, src, name=None):
    """Load the single integer of a [1, 1] SBUF tile into register `dst`."""
    op = "register_load"
    run = current_run()
    _register(op, dst)
    checks.access(op, "gpsimd", "src", src, "read")
    require(src.size == 1, f"{op}: src must hold exactly one element ([1, 1]), got {list(src.shape)}")
    if run.numerics:
        dst.value = int(np.asarray(src.read()).reshape(-1)[0])
    run.timeline.compute("gpsimd", op, 64, reads=[src], writes=[])


def register_store(dst, src, name=None):
    """Store register `src` into a [1, 1] SBUF tile."""
    op = "register_store"
    run = current_run()
    _register(op, src)
    checks.access(op, "gpsimd", "dst", dst, "write")
    require(dst.size == 1, f"{op}: dst must hold exactly one element ([1, 1]), got {list(dst.shape)}")
    if run.numerics:
        dst.write(np.full(dst.shape, src.value), run.precise)
    run.timeline.compute("gpsimd", op, 64, reads=[], writes=[dst])


def register_move(dst, imm, name=None):
    """Set register `dst` to the immediate `imm`."""
    _register("register_move", dst).value = int(imm)
