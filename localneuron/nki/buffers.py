"""Memory spaces a tensor can live in (nl.sbuf, nl.psum, nl.hbm, ...)."""


class Buffer:
    def __init__(self, name, on_chip):
        self.name = name
        self.on_chip = on_chip

    def __repr__(self):
        return f"nl.{self.name}"


sbuf = Buffer("sbuf", on_chip=True)
psum = Buffer("psum", on_chip=True)
private_hbm = Buffer("private_hbm", on_chip=False)
shared_hbm = Buffer("shared_hbm", on_chip=False)
hbm = private_hbm  # documented alias


def is_sbuf(t):
    return t.buffer is sbuf


def is_psum(t):
    return t.buffer is psum


def is_hbm(t):
    return not t.buffer.on_chip


def is_on_chip(t):
    return t.buffer.on_chip


def kind(buffer):
    """'sbuf', 'psum' or 'hbm': the granularity the engine access rules are written in."""
    return buffer.name if buffer.on_chip else "hbm"
