"""Adaptive Eager (TORCH_NEURONX_ENABLE_CONCATENATION=1): runs of queued element-wise ops run as one
executable from the compile path; matmuls join runs and run with their own kernels; each
fused run is tracked as one op under its ops' names joined by '|' (localneuron/ops/tracking.py op_counts). The C++
side (csrc/fusion/fusion.cpp) holds the runs back and calls compile.py for a run's signature; engine.py configures
it; stats.py reports what it did."""
