"""Errors a kernel can raise while it is checked and simulated.

Constraint errors subclass AssertionError because AWS's simulator reports broken
instruction constraints that way; user code that catches AssertionError keeps working.
"""


class NkiConstraintError(AssertionError):
    """An instruction argument breaks a hardware rule (the message names the parameter and the limit)."""


class NkiCapacityError(NkiConstraintError):
    """The kernel's live SBUF or PSUM allocations no longer fit the NeuronCore."""


class NkiUsageError(TypeError):
    """The kernel language is used in a way NKI does not allow (wrong argument kind, API misuse)."""


def require(condition, message):
    """Raise NkiConstraintError with `message` unless `condition` holds."""
    if not condition:
        raise NkiConstraintError(message)
