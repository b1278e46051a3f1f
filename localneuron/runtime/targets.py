"""The Trainium chips localneuron can simulate, with the published figures the simulation uses.

Figures: reference/nki-hardware-profiler.md §7 (Neuron architecture pages). A target describes one
chip as TorchNeuron exposes it: logical NeuronCores (LNC=2 by default) sharing the chip's HBM.
"""
from dataclasses import dataclass

GIB = 1 << 30


@dataclass(frozen=True)
class Target:
    name: str
    nc_version: str            # NKI name of the NeuronCore generation
    logical_cores: int         # per chip at LNC=2
    hbm_bytes_per_core: int
    hbm_bytes_per_s_per_core: float
    bf16_flops_per_core: float  # TensorE dense peak of one logical core (two physical cores)
    fp32_flops_per_core: float
    vector_flops_per_core: float
    host_link_bytes_per_s: float  # host <-> device DMA, per core
    launch_overhead_s: float      # runtime cost of one executable launch


TARGETS = {
    "trn2": Target(
        name="trn2", nc_version="gen3", logical_cores=4, hbm_bytes_per_core=24 * GIB,
        hbm_bytes_per_s_per_core=2.9e12 / 4, bf16_flops_per_core=2 * 79e12, fp32_flops_per_core=2 * 20e12,
        vector_flops_per_core=2 * 1.0e12, host_link_bytes_per_s=2 * 23e9, launch_overhead_s=15e-6),
    "trn3": Target(
        name="trn3", nc_version="gen4", logical_cores=4, hbm_bytes_per_core=36 * GIB,
        hbm_bytes_per_s_per_core=4.9e12 / 4, bf16_flops_per_core=2 * 79e12, fp32_flops_per_core=2 * 20e12,
        vector_flops_per_core=2 * 1.2e12, host_link_bytes_per_s=2 * 33e9, launch_overhead_s=15e-6),
}
DEFAULT_TARGET = "trn2"
