"""Importing `neuronxcc.nki` (or anything under it) fails as it does since Neuron 2.34, which removed the
deprecated namespace from neuronx-cc (announced with Neuron 2.27; inside kernels it is a compile error
since 2.28). The error gives the migration: import the standalone `nki` package, whose kernels take the
destination first (`nisa.tensor_copy(dst=..., src=...)`), allocate outputs in `nl.shared_hbm`, index
with slices instead of `nl.arange`/`nl.mgrid`, and run on the CPU with `nki.simulate(kernel)(...)` instead
of `nki.simulate_kernel`, `nki.baremetal` or `nki.benchmark` from the old namespace.
"""
MIGRATION = (
    "Neuron 2.34 removed the deprecated neuronxcc.nki namespace from neuronx-cc; import the standalone nki "
    "package instead: `import nki`, `import nki.language as nl`, `import nki.isa as nisa`. Kernels written "
    "for neuronxcc.nki need more than new imports (NKI Kernel Migration Guide): ISA calls take their "
    "destination first (nisa.tensor_copy(dst=..., src=...)), kernel outputs are allocated with "
    "buffer=nl.shared_hbm and returned, tiles are indexed with slices (nl.arange/nl.mgrid index expressions "
    "are gone), and nki.simulate(kernel)(*arrays) replaces nki.simulate_kernel/nki.baremetal; "
    "nki.benchmark(kernel)(*arrays) estimates a kernel's time.")

# ImportError, not ModuleNotFoundError: `from neuronxcc import nki` would turn the latter into a bare
# "cannot import name" and lose the migration steps.
raise ImportError(f"No module named 'neuronxcc.nki': {MIGRATION}", name=__name__)
