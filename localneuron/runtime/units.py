"""How localneuron prints a quantity: one function per kind (bytes, seconds), so a size or a time reads
the same in every report and command. Bytes use binary units (what allocators and HBM capacities are
given in), in CUDA's out-of-memory wording; seconds use the unit that keeps three significant digits before
the point."""
from localneuron._C import format_bytes

SECOND_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))


def bytes_text(n: float) -> str:
    """1536 -> '1.50 KiB', 512 -> '512 bytes'. The allocator's out-of-memory message needs the formatter in C++
    (csrc/runtime/allocator.h format_bytes), so this is that one function, not a second one."""
    return format_bytes(float(n))


def seconds_text(s: float) -> str:
    """0.0123 -> '12.3 ms', 4321.0 -> '4,321 s'."""
    for scale, unit in SECOND_UNITS:
        if abs(s) >= scale or unit == "ns":
            value = s / scale
            return f"{value:,.0f} {unit}" if abs(value) >= 1000 else f"{value:.3g} {unit}"
    raise AssertionError("unreachable")
