"""How localneuron prints a quantity: one function per kind (bytes, seconds), so a size or a time reads
the same in every report and command. Bytes use binary units (what allocators and HBM capacities are
given in); seconds use the unit that keeps three significant digits before the point."""

BYTE_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")
SECOND_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))


def bytes_text(n: float) -> str:
    """1536 -> '1.50 KiB'; whole bytes below 1 KiB."""
    value = float(n)
    for unit in BYTE_UNITS:
        if abs(value) < 1024 or unit == BYTE_UNITS[-1]:
            return f"{int(value)} B" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def seconds_text(s: float) -> str:
    """0.0123 -> '12.3 ms', 4321.0 -> '4,321 s'."""
    for scale, unit in SECOND_UNITS:
        if abs(s) >= scale or unit == "ns":
            value = s / scale
            return f"{value:,.0f} {unit}" if abs(value) >= 1000 else f"{value:.3g} {unit}"
    raise AssertionError("unreachable")
