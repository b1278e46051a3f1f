"""The cost model: one table of Trainium targets and engine rates (hardware.py), the few assumptions
about well-compiled code (assumptions.py), per-op engine work (engines.py), eager ops and compiled
graphs (ops.py), collectives (collectives.py). Everything that shows an estimated time uses it: the
eager report, compiled graphs, the distributed report, the NKI cycle model and `localneuron estimate`.
It imports nothing from the layers above it."""
