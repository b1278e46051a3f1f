"""What a torch.compile(backend="neuron") call is configured with: its options and the environment.

Contract §9.2, §9.5, §9.6, §5.3, §7.5 and §19 name the variables and their defaults; everything the
backend reads from the environment is read here, once per compiled graph.
"""
import logging
import os
from dataclasses import dataclass

from localneuron.ops import tracking
from localneuron.runtime import environment

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
OPTION_KEYS = ("fallback_execution", "model_name")  # the options keys TorchNeuron reads
DEFAULT_MODEL_NAME = "model_default"

# The compile variables' names and defaults come from the one environment table (the per-user cache
# and debug directories of the trust model, cache.py); they are parsed here, leniently, once per graph.
COMPILE_VARIABLES = (
    "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION",
    "TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY",
    "TORCH_NEURONX_RETAIN_DEVICE_MODE",
    "TORCH_NEURONX_NEFF_CACHE_DIR",
    "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR",
    "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT",
    "TORCH_NEURONX_DISABLE_NEFF_CACHE",
    "TORCH_NEURONX_NEFF_DISABLE_CACHE",
    "TORCH_NEURONX_DEBUG_DIR",
    "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS",
    "LOCALNEURON_SHARED_CACHE_KEY_FILE",
)
ENV_DEFAULTS = {name: environment.BY_NAME[name].default or "" for name in COMPILE_VARIABLES}

log = logging.getLogger("localneuron.compiler")


def env(name: str) -> str:
    return os.environ.get(name, ENV_DEFAULTS[name])


def env_flag(name: str) -> bool:
    return env(name).strip().lower() in ("1", "true", "yes", "on")


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
        enabled=not (env_flag("TORCH_NEURONX_DISABLE_NEFF_CACHE") or env_flag("TORCH_NEURONX_NEFF_DISABLE_CACHE")),
        directory=env("TORCH_NEURONX_NEFF_CACHE_DIR"),
        lock_directory=env("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR"),
        lock_timeout_s=_lock_timeout_s(),
        shared_key_file=env("LOCALNEURON_SHARED_CACHE_KEY_FILE") or None)


def _lock_timeout_s() -> float:
    value = env("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT")
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        default = ENV_DEFAULTS["TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"]
        tracking.warn_once(f"lock-timeout:{value}", f"TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT={value!r} is not a "
                           f"number of seconds >= 0; using {default}.")
        seconds = float(default)
    return seconds


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
        fallback = not env_flag("TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION")
    return CompileSettings(
        model_name=str(options.get("model_name") or DEFAULT_MODEL_NAME),
        fallback_execution=bool(fallback),
        cpu_autocopy=not env_flag("TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY"),
        retain_device=env_flag("TORCH_NEURONX_RETAIN_DEVICE_MODE"),
        debug_dir=env("TORCH_NEURONX_DEBUG_DIR"),
        preserve_artifacts=env_flag("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS"),
        cache=cache_settings())
