"""torch.compile(backend="neuron"): whole-graph compilation with static shapes and a shared compile cache.

backend.py (the Dynamo entry point) -> graph_compiler.py (AOTAutograd's fw/bw compilers) ->
partition.py (ops that run eagerly) -> host_compile.py (cache key, cache, artifacts) -> inductor.py
(host code generator) -> launch.py (runs host code on device memory). metrics.py and report.py say
what was compiled, recompiled and cached.
"""
from localneuron.compiler import report  # noqa: F401  (registers the portability report's compile section)
from localneuron.compiler.metrics import get_dynamo_metrics, reset_dynamo_metrics  # noqa: F401
