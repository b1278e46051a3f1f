"""What a neuron trace captures, from the string torch_neuronx.profiling.NeuronConfig hands to Kineto
(`_ExperimentalConfig(custom_profiler_config="modes:DEVICE,RUNTIME;max_events_per_nc:N;
capture_enabled_for_nc:0,1,2-5;profile_output_dir:DIR")`, docs/support-matrix.md#profiling). An empty string (plain
torch.profiler) captures everything."""
from dataclasses import dataclass

MODES = ("DEVICE", "RUNTIME", "CPU_UTIL", "HOST_MEMORY")
DEFAULT_MODES = ("DEVICE", "RUNTIME")
KEYS = ("modes", "max_events_per_nc", "capture_enabled_for_nc", "profile_output_dir", "neff_cache_dir")


@dataclass(frozen=True)
class CaptureConfig:
    modes: tuple[str, ...] = DEFAULT_MODES
    max_events_per_nc: int | None = None
    cores: frozenset[int] | None = None  # None: every NeuronCore
    output_dir: str | None = None
    neff_cache_dir: str | None = None

    def captures(self, core: int) -> bool:
        return self.cores is None or core in self.cores


def parse_cores(spec: str) -> frozenset[int]:
    """'0,1,2-5' -> {0, 1, 2, 3, 4, 5}"""
    cores = set()
    for part in spec.split(","):
        part = part.strip()
        low, _, high = part.partition("-")
        if not low.isdigit() or (high and not high.isdigit()) or (high and int(high) < int(low)):
            raise ValueError(f"capture_enabled_for_nc={spec!r}: expected NeuronCore indices and ranges like '0,1,2-5'")
        cores.update(range(int(low), int(high or low) + 1))
    return frozenset(cores)


def parse(text: str) -> CaptureConfig:
    if not text:
        return CaptureConfig()
    fields = {}
    for item in text.split(";"):
        if not item.strip():
            continue
        key, sep, value = item.partition(":")
        key = key.strip()
        if not sep or key not in KEYS:
            raise ValueError(f"neuron profiler config {item!r}: expected 'key:value' with a key among {KEYS}")
        fields[key] = value.strip()
    modes = tuple(m.strip().upper() for m in fields.get("modes", ",".join(DEFAULT_MODES)).split(",") if m.strip())
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise ValueError(f"neuron profiler modes {unknown} are unknown; choose among {MODES}")
    max_events = fields.get("max_events_per_nc")
    if max_events is not None and (not max_events.isdigit() or int(max_events) == 0):
        raise ValueError(f"max_events_per_nc={max_events!r}: expected a positive integer")
    cores = fields.get("capture_enabled_for_nc")
    return CaptureConfig(modes=modes, max_events_per_nc=int(max_events) if max_events else None,
                         cores=parse_cores(cores) if cores else None, output_dir=fields.get("profile_output_dir"),
                         neff_cache_dir=fields.get("neff_cache_dir"))


def render(config: CaptureConfig) -> str:
    parts = [f"modes:{','.join(config.modes)}"]
    if config.max_events_per_nc is not None:
        parts.append(f"max_events_per_nc:{config.max_events_per_nc}")
    if config.cores is not None:
        parts.append(f"capture_enabled_for_nc:{','.join(str(c) for c in sorted(config.cores))}")
    if config.output_dir:
        parts.append(f"profile_output_dir:{config.output_dir}")
    if config.neff_cache_dir:
        parts.append(f"neff_cache_dir:{config.neff_cache_dir}")
    return ";".join(parts)
