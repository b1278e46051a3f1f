"""`import nki`: the NKI kernel language, served by localneuron's simulated NeuronCore."""
import torch  # noqa: F401  (localneuron's C++ core links against torch's libraries, so load them first)

from localneuron.nki import *  # noqa: F401,F403
from localneuron.nki import __all__  # noqa: F401
from . import isa, language  # noqa: F401
