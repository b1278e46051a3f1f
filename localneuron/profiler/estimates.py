"""The profiler's one call into the cost model: swapping the cost model underneath changes this
function only. Executables carry their estimate from compile time; this prices the rest (copies)."""
from localneuron.runtime import cost_model
from localneuron.runtime.config import selected_target


def estimated_seconds(op: str, args: tuple, on_host: bool) -> float:
    return cost_model.estimate_seconds(selected_target(), op, args, {}, on_host=on_host)
