"""`import nki.isa as nisa`."""
import sys

from localneuron.nki import isa as _isa

sys.modules[__name__] = _isa
