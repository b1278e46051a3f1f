"""`nki_cpu_simulator.nki` is localneuron's `nki`: every registered `nki.*` module under this name too."""
import sys

import nki

for _name, _module in list(sys.modules.items()):
    if _name == "nki" or _name.startswith("nki."):
        sys.modules[f"{__name__}.{_name}"] = _module
