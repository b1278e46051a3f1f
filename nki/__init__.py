"""`import nki`: the NKI kernel language, served by localneuron's simulated NeuronCore.

Every public module of the `nki` namespace is the localneuron module that implements it, registered
under its public name here, so `import nki.isa.constants` and `localneuron.nki.isa.constants` are one
module (one set of enums, one kernel registry) whichever spelling imported it first.
"""
import importlib
import sys

import torch  # noqa: F401  (localneuron's C++ core links against torch's libraries, so load them first)

from localneuron.nki import *  # noqa: F401,F403
from localneuron.nki import __all__  # noqa: F401

# public module -> the module that implements it
PUBLIC_MODULES = {
    "language": "localneuron.nki.language",
    "language.dtypes": "localneuron.nki.dtypes",
    "dtype": "localneuron.nki.dtypes",
    "isa": "localneuron.nki.isa",
    "isa.constants": "localneuron.nki.isa.constants",
    "collectives": "localneuron.nki.collectives",
    "typing": "localneuron.nki.typing",
    "tensor": "localneuron.nki.tensor",
    "compiler": "localneuron.nki.compiler",
    "builtin": "localneuron.nki.builtin",
}

for _public, _module in PUBLIC_MODULES.items():
    _parent, _, _leaf = f"{__name__}.{_public}".rpartition(".")
    sys.modules[f"{__name__}.{_public}"] = importlib.import_module(_module)
    # `import nki.language.dtypes as d` reads the attribute chain, so each module is also its parent's attribute
    setattr(sys.modules[_parent], _leaf, sys.modules[f"{__name__}.{_public}"])
