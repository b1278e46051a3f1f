"""What a torch.compile(backend="neuron") call is configured with: its options and the environment.

TorchNeuron's environment variables page names the variables and their defaults
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch/reference/env-vars.html; here: docs/environment.md);
the one environment table (runtime/environment.py) reads and checks them, once per compiled graph.
"""
import logging
from dataclasses import dataclass

from localneuron.runtime.environment import read

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
OPTION_KEYS = ("fallback_execution", "model_name")  # the options keys TorchNeuron reads
DEFAULT_MODEL_NAME = "model_default"

log = logging.getLogger("localneuron.compiler")


@dataclass(frozen=True)
class CacheSettings:
    enabled: bool
    directory: str
    lock_directory: str
    lock_timeout_s: float          # bounds every wait for a lock, ours and the code generator's
    shared_key_file: str | None    # None: a private cache, this user's own directory and key


@dataclass(frozen=True)
class CompileSettings:
    model_name: str
    fallback_execution: bool  # a graph that fails to compile runs eagerly instead of raising
    cpu_autocopy: bool
    retain_device: bool
    debug_dir: str
    preserve_artifacts: bool
    cache: CacheSettings


def cache_settings() -> CacheSettings:
    return CacheSettings(
        enabled=not (read("TORCH_NEURONX_DISABLE_NEFF_CACHE") or read("TORCH_NEURONX_NEFF_DISABLE_CACHE")),
        directory=read("TORCH_NEURONX_NEFF_CACHE_DIR"),
        lock_directory=read("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR"),
        lock_timeout_s=read("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"),
        shared_key_file=read("LOCALNEURON_SHARED_CACHE_KEY_FILE"))


def resolve(mode: str | None, options: dict | None) -> CompileSettings:
    """Settings for one torch.compile call; unsupported modes and unknown options warn, never fail."""
    if mode not in (None, "default"):
        # Same text as TorchNeuron (logging.warning), so log scrapers written for it keep working.
        logging.warning(f"Neuron backend does not support mode='{mode}', falling back to default mode.")
    options = dict(options or {})
    unknown = sorted(set(options) - set(OPTION_KEYS))
    if unknown:
        log.warning("Neuron backend ignores torch.compile options %s; it reads only %s.", unknown, list(OPTION_KEYS))
    fallback = options.get("fallback_execution")
    if fallback is None:
        fallback = not read("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION")
    return CompileSettings(
        model_name=str(options.get("model_name") or DEFAULT_MODEL_NAME),
        fallback_execution=bool(fallback),
        cpu_autocopy=not read("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY"),
        retain_device=read("TORCH_NEURONX_RETAIN_DEVICE_MODE"),
        debug_dir=read("TORCH_NEURONX_DEBUG_DIR"),
        preserve_artifacts=read("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS"),
        cache=cache_settings())
