"""torch_neuronx.metrics: TorchNeuron's runtime counters and timed samples (the compilation cache's), collected while
enabled (TORCH_NEURONX_METRICS_ENABLED=1, or set_enabled(True)); localneuron/runtime/counters.py says what each counts."""
from localneuron.runtime.counters import (  # noqa: F401
    clear_all, clear_counters, clear_metrics, get_compilation_metrics, get_counter_names, get_counter_value,
    get_metric_data, get_metric_names, is_enabled, report, report_filtered, set_enabled,
)
