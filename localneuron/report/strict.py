"""`localneuron run --strict`: the report's data read as a CI gate. A run that succeeded fails with
STRICT_FAILURE when an op fell back to the CPU or the run recompiled more often than allowed."""

STRICT_FAILURE = 3  # exit status of `localneuron run --strict` when the run itself succeeded


def failures(data: dict, max_recompiles: int) -> list[str]:
    """What --strict refuses in the report's data, one line each (none: the run passes)."""
    found = []
    if data["cpu_fallback_ops"]:
        found.append(f"{len(data['cpu_fallback_ops'])} ops fell back to the CPU: "
                     + ", ".join(data["cpu_fallback_ops"]))
    recompiles = len(data.get("compile", {}).get("recompiles", []))
    if recompiles > max_recompiles:
        found.append(f"{recompiles} recompiles (more than --max-recompiles {max_recompiles})")
    return found
