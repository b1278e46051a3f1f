"""NeuronCore generations the simulator can model, and how the target is chosen.

Figures are the published per-core numbers (see the reference notes §7.1 and §8); they drive
both the constraint checks and the cycle model, so one table changes both.
"""
from dataclasses import dataclass, field

from localneuron.runtime.config import selected_target
from localneuron.runtime.environment import ConfigurationError, read

KIB = 1024


@dataclass(frozen=True)
class Target:
    name: str                      # "gen2" / "gen3" / "gen4" (nisa.nc_version names)
    chip: str                      # Trn1 / Trn2 / Trn3
    clock_ghz: dict                # engine -> clock
    sbuf_partition_bytes: int
    sbuf_reserved_bytes: int       # per partition, kept back for the compiler
    dma_peak_bytes_per_ns: float   # one DMA engine, theoretical
    dma_sustained_bytes_per_ns: float  # one DMA engine, large (>= 4 KiB) descriptors
    gemm_moving_fmax_fp32_dst: int
    gemm_moving_fmax_bf16_dst: int
    psum_partition_bytes: int = 16 * KIB
    psum_bank_bytes: int = 2 * KIB
    dma_queues: int = 16
    dma_fixed_latency_ns: float = 1300.0
    features: frozenset = field(default_factory=frozenset)   # generation-gated capabilities

    @property
    def sbuf_usable_bytes(self):
        return self.sbuf_partition_bytes - self.sbuf_reserved_bytes

    @property
    def psum_banks(self):
        return self.psum_partition_bytes // self.psum_bank_bytes

    def has(self, feature):
        return feature in self.features


TARGETS = {
    "gen2": Target(
        name="gen2", chip="Trn1",
        clock_ghz={"tensor": 2.8, "vector": 1.12, "scalar": 1.4, "gpsimd": 1.4},
        sbuf_partition_bytes=192 * KIB, sbuf_reserved_bytes=16 * KIB,
        dma_peak_bytes_per_ns=27.2, dma_sustained_bytes_per_ns=17.0,
        gemm_moving_fmax_fp32_dst=512, gemm_moving_fmax_bf16_dst=512),
    "gen3": Target(
        name="gen3", chip="Trn2",
        clock_ghz={"tensor": 2.4, "vector": 0.96, "scalar": 1.2, "gpsimd": 1.2},
        sbuf_partition_bytes=224 * KIB, sbuf_reserved_bytes=0,
        dma_peak_bytes_per_ns=27.2, dma_sustained_bytes_per_ns=23.0,
        gemm_moving_fmax_fp32_dst=512, gemm_moving_fmax_bf16_dst=512,
        features=frozenset({"scalar_alu", "scalar_bias_immediate", "vector_perf_mode"})),
    "gen4": Target(
        name="gen4", chip="Trn3",
        clock_ghz={"tensor": 2.4, "vector": 1.2, "scalar": 1.2, "gpsimd": 1.2},
        sbuf_partition_bytes=256 * KIB, sbuf_reserved_bytes=0,
        dma_peak_bytes_per_ns=38.4, dma_sustained_bytes_per_ns=33.0,
        gemm_moving_fmax_fp32_dst=4096, gemm_moving_fmax_bf16_dst=8192,
        features=frozenset({"scalar_alu", "scalar_bias_immediate", "vector_perf_mode", "exponential",
                            "bf16_psum", "fp8_fn"})),
}

# Names accepted by NEURON_PLATFORM_TARGET_OVERRIDE.
ALIASES = {"trn1": "gen2", "inf2": "gen2", "trn2": "gen3", "trn3": "gen4",
           "gen2": "gen2", "gen3": "gen3", "gen4": "gen4"}
GENERATION_ORDER = ("gen2", "gen3", "gen4")


def resolve(name):
    key = ALIASES.get(str(name).lower())
    if key is None:
        raise ValueError(f"unknown NeuronCore target {name!r}; expected one of {sorted(ALIASES)}")
    return TARGETS[key]


def current():
    """The target chosen by NEURON_PLATFORM_TARGET_OVERRIDE, else the simulated device's."""
    override = read("NEURON_PLATFORM_TARGET_OVERRIDE")
    if override is None:
        return resolve(_device_target())
    try:
        return resolve(override)
    except ValueError as error:
        raise ConfigurationError(f"NEURON_PLATFORM_TARGET_OVERRIDE={override!r} is not valid: {error}") from None


def _device_target():
    return selected_target().nc_version


def at_least(target, generation):
    return GENERATION_ORDER.index(target.name) >= GENERATION_ORDER.index(generation)
