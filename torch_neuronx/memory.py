"""torch_neuronx.memory: the memory API under its submodule name."""
from localneuron.device.memory import (  # noqa: F401
    empty_cache, max_memory_allocated, max_memory_reserved, mem_get_info, memory_allocated, memory_reserved,
    memory_stats, memory_summary, reset_accumulated_memory_stats, reset_peak_memory_stats, _dump_snapshot,
    _record_memory_history, _snapshot,
)
