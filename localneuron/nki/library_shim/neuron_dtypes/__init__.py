"""`neuron_dtypes` is localneuron.nki.dtypes: NKI dtypes as numpy sees them, `static_cast`, packed MX types."""
from localneuron.nki.dtypes import *  # noqa: F401,F403
from localneuron.nki.dtypes import finfo, is_float_type, sizeinbytes, static_cast  # noqa: F401
