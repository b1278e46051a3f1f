"""`import nki.language as nl`."""
import sys

from localneuron.nki import language as _language

sys.modules[__name__] = _language
