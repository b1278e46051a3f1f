"""Adaptive Eager's switch and tuning, from the environment table, installed in the C++ engine
(csrc/fusion/fusion.cpp) when the device registers. Only with asynchronous execution: under
NEURON_LAUNCH_BLOCKING=1 nothing is queued, so nothing is fused."""
import contextlib

from localneuron import _C
from localneuron.adaptive_eager.fusible_ops import FLOAT32, FUSIBLE_OPS, MATMULS, NUMBERS_FLOAT32
from localneuron.runtime.environment import read


def _compile_run(description: dict):
    from localneuron.adaptive_eager import compile  # the code generator loads on the first fused run only

    return compile.compile_run(description)


_enabled = False


def configure(enabled: bool) -> None:
    global _enabled
    _enabled = enabled
    _C.set_fusion(enabled=enabled, run_limit=read("TORCH_NEURONX_CONCATENATION_BUFFER_SIZE_LIMIT"),
                  low_threshold=read("TORCH_NEURONX_CONCATENATION_QUEUE_LOW_THRESHOLD"),
                  skip_intermediate=read("TORCH_NEURONX_APPLY_SKIP_INTERMEDIATE"))


def install() -> None:
    _C.install_fusion(compile_run=_compile_run, ops=list(FUSIBLE_OPS),
                      float32_only=[op for op, rule in FUSIBLE_OPS.items() if rule == FLOAT32],
                      numbers_float32_only=[op for op, rule in FUSIBLE_OPS.items() if rule == NUMBERS_FLOAT32],
                      matmuls=list(MATMULS))
    configure(read("TORCH_NEURONX_ENABLE_CONCATENATION"))


@contextlib.contextmanager
def switched(enabled: bool):
    """Adaptive Eager on or off within the block, whatever the environment says (tests, benchmarks)."""
    previous = _enabled
    _C.synchronize_all()
    configure(enabled)
    try:
        yield
    finally:
        _C.synchronize_all()
        configure(previous)
