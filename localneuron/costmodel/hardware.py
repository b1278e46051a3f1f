"""The one table of Trainium targets and engine rates: the device (cores, HBM), the eager and
compiled cost model, collectives, `localneuron estimate` and the NKI cycle model all read it.

Every figure is a published one; the comment names the public page it comes from by a key below, and a
figure no page states says "derived:" and how. Derived quantities (per logical core, per link direction)
are properties, so a figure is written once.

Sources (RTD/ = https://awsdocs-neuron.readthedocs-hosted.com/en/latest/, the AWS Neuron documentation;
GH226/ = https://github.com/aws-neuron/aws-neuron-sdk/blob/v2.26.1/, its source at the last legacy-NKI release):
  [nc-v2-arch]   RTD/nki/guides/architecture/trainium_inferentia2_arch.html  (NeuronCore-v2, engine rules)
  [nc-v3-arch]   RTD/nki/guides/architecture/trainium2_arch.html             (NeuronCore-v3)
  [nc-v4-arch]   RTD/nki/guides/architecture/trainium3_arch.html             (NeuronCore-v4)
  [dma-overview] RTD/nki/get-started/about/nki-dma-overview.html             (DMA engine peak rate)
  [dma-bw]       RTD/nki/deep-dives/nki-dma-bandwidth-guide.html             (DMA engines, sustained rate, curve)
  [isa-2.26]     GH226/nki/api/nki/isa/__init__.py                           (legacy nki.isa cost tables)
  [isa]          https://github.com/aws-neuron/aws-neuron-sdk/blob/master/nki/api/nki/isa/__init__.py (nc_matmul)
  [pm-2.26]      GH226/nki/programming_model.rst                             (tile-size constraints TC#1-TC#3)
  [alloc-2.26]   GH226/nki/nki_direct_allocation_guide.rst                   (SBUF bytes kept for the compiler)
  [trainium]     RTD/about-neuron/arch/neuron-hardware/trainium.html         (Trainium chip)
  [trainium2]    RTD/about-neuron/arch/neuron-hardware/trainium2.html        (Trainium2 chip)
  [trainium3]    RTD/about-neuron/arch/neuron-hardware/trainium3.html        (Trainium3 chip)
  [trn1-arch]    RTD/about-neuron/arch/neuron-hardware/trn1-arch.html        (Trn1 instances)
  [trn2-arch]    RTD/about-neuron/arch/neuron-hardware/trn2-arch.html        (Trn2 instances)
  [trn3-arch]    RTD/about-neuron/arch/neuron-hardware/trn3-arch.html        (Trn3 UltraServers)
  [lnc]          RTD/about-neuron/arch/neuron-features/logical-neuroncore-config.html (logical NeuronCores)
"""
import dataclasses
from dataclasses import dataclass, field

from localneuron.costmodel import stacks

KIB = 1024
GIB = 1 << 30


@dataclass(frozen=True)
class NeuronCore:
    """One physical NeuronCore generation; the NKI simulator's target is this record."""
    name: str                      # NKI's nc_version name: gen2 / gen3 / gen4
    chip: str                      # Trn1 / Trn2 / Trn3
    clock_ghz: dict                # engine -> clock ([nc-v2-arch] / [nc-v3-arch] / [nc-v4-arch])
    pe_array: int                  # TensorE is pe_array x pe_array processing elements (the arch guides)
    vector_lanes: int              # elements per cycle of VectorE / ScalarE / GpSimd at 32 bits
                                   # ([nc-v2-arch]; GpSimd: [isa-2.26])
    sbuf_partition_bytes: int      # SBUF is 128 partitions of this (the arch guides)
    sbuf_reserved_bytes: int       # per partition, kept back for the compiler: NC-v2 [alloc-2.26];
                                   # none published for NC-v3/v4, so 0 (assumed)
    dma_peak_bytes_per_ns: float   # one DMA engine, theoretical ([dma-overview], [nc-v2-arch])
    dma_sustained_bytes_per_ns: float  # one DMA engine, descriptors >= 4 KiB ([dma-bw])
    gemm_moving_fmax_fp32_dst: int  # moving free size of one matmul: 512 ([pm-2.26] TC#3), NC-v4 [isa]
    gemm_moving_fmax_bf16_dst: int
    partitions: int = 128                  # [pm-2.26] TC#1, the arch guides
    psum_partition_bytes: int = 16 * KIB   # 2 MiB PSUM, 8 banks of 2 KiB per partition (the arch guides)
    psum_bank_bytes: int = 2 * KIB
    dma_queues: int = 16                   # DMA engines per core ([dma-bw])
    dma_fixed_latency_ns: float = 1300.0   # descriptor + semaphore + start latency of a transfer ([dma-bw])
    fp32_matmul_slowdown: int = 4          # fp32 inputs cost 4x the bf16 MultiplyMoving ([isa-2.26] nc_matmul)
    features: frozenset = field(default_factory=frozenset)   # generation-gated NKI capabilities

    @property
    def sbuf_usable_bytes(self):
        return self.sbuf_partition_bytes - self.sbuf_reserved_bytes

    @property
    def sbuf_bytes(self):
        return self.partitions * self.sbuf_usable_bytes

    @property
    def psum_banks(self):
        return self.psum_partition_bytes // self.psum_bank_bytes

    def has(self, feature):
        return feature in self.features

    @property
    def bf16_flops(self):
        """TensorE dense peak: every PE does one multiply-add (2 FLOP) per cycle."""
        return 2 * self.pe_array * self.pe_array * self.clock_ghz["tensor"] * 1e9

    @property
    def dma_descriptor_ns(self):
        """Per-descriptor DMA overhead: 4 KiB descriptors run at the sustained rate while the payload
        itself moves at the theoretical engine rate ([dma-bw] efficiency curve)."""
        return 4096 / self.dma_sustained_bytes_per_ns - 4096 / self.dma_peak_bytes_per_ns

    def dma_efficiency(self, descriptor_bytes):
        """Share of the sustained DMA rate reached with descriptors of `descriptor_bytes` (1 from 4 KiB)."""
        per_descriptor_ns = self.dma_descriptor_ns + descriptor_bytes / self.dma_peak_bytes_per_ns
        return min(1.0, descriptor_bytes / self.dma_sustained_bytes_per_ns / per_descriptor_ns)

    @property
    def dma_bytes_per_s(self):
        """What all DMA queues of the core sustain on large transfers: the core's reach into HBM."""
        return self.dma_queues * self.dma_sustained_bytes_per_ns * 1e9


@dataclass(frozen=True)
class Chip:
    """A Trainium generation as an instance exposes it: chips of physical NeuronCores, grouped into
    logical cores (LNC), with the chip's HBM and links shared by its cores."""
    name: str                      # trn1 / trn2 / trn3 (LOCALNEURON_TARGET, --target)
    core: NeuronCore
    physical_cores: int            # per chip ([trainium] / [trainium2] / [trainium3])
    lnc: int                       # physical cores per logical core by default ([lnc])
    chips_per_instance: int        # [trn1-arch] / [trn2-arch] / [trn3-arch]
    hbm_bytes: int                 # per chip ([trainium] / [trainium2] / [trainium3])
    hbm_bytes_per_s: float         # per chip (same pages)
    neuronlink_bytes_per_s: float  # chip-to-chip, per chip, all links and both directions (same pages)
    neuronlink_links: int          # links per chip (same pages)
    efa_bits_per_s: float          # per instance ([trn1-arch] / [trn2-arch] / [trn3-arch])
    launch_overhead_s: float = 15e-6   # runtime cost of one executable launch (Neuron runtime, not published per chip)
    stack: str = stacks.DEFAULT        # the software whose efficiencies price work on it (not a hardware figure:
                                       # costmodel/stacks.py, fitted on published rows; --stack)

    # --- the device as TorchNeuron shows it ------------------------------------------------------
    def at_lnc(self, lnc: int) -> "Chip":
        """This chip with `lnc` physical cores per logical core: [lnc] allows 1 or 2 on Trn2 and Trn3 (LNC=2 their
        default), and Trn1 runs one physical core per logical core only. A logical core at LNC=1 has one physical
        core's engines, DMA queues and HBM share, at LNC=2 two's; the chip's HBM is divided among its logical cores
        ([lnc]: each 24 GB bank serves two physical cores, as one logical core or two)."""
        if lnc == self.lnc:
            return self
        if lnc not in (1, 2) or self.physical_cores % lnc:
            raise ValueError(f"LNC={lnc}: {self.name} groups its {self.physical_cores} physical NeuronCores per chip "
                             "into logical cores of 1 or 2 (1 or 2 are the only LNC values)")
        if self.name == "trn1":
            raise ValueError(f"LNC={lnc}: trn1 runs one physical NeuronCore per logical core (LNC=1) only")
        return dataclasses.replace(self, lnc=lnc)

    @property
    def nc_version(self):
        return self.core.name

    @property
    def logical_cores(self):
        return self.physical_cores // self.lnc

    @property
    def hbm_bytes_per_core(self):
        return self.hbm_bytes // self.logical_cores

    @property
    def cores_per_instance(self):
        return self.chips_per_instance * self.logical_cores

    # --- rates of one logical core (LNC physical cores working together) ----------------------
    @property
    def bf16_flops_per_core(self):
        return self.lnc * self.core.bf16_flops

    @property
    def fp32_flops_per_core(self):
        return self.bf16_flops_per_core / self.core.fp32_matmul_slowdown

    @property
    def efficiencies(self):
        """What the stack's software reaches of this hardware (fitted, not published: costmodel/stacks.py)."""
        return stacks.efficiencies(self.stack, self.name)

    @property
    def memory_bytes_per_s_per_core(self):
        return self.hbm_bytes_per_s_reached()

    def hbm_bytes_per_s_reached(self, descriptor_bytes=None):
        """A core reaches HBM through its DMA queues: the smaller of its share of the chip's HBM bandwidth
        (derived: the chip's HBM rate over its physical cores) and what its queues sustain, below their
        sustained rate when a transfer can only use descriptors of `descriptor_bytes`; at the fraction of it
        the stack's graphs sustain."""
        dma = self.core.dma_bytes_per_s * (self.core.dma_efficiency(descriptor_bytes) if descriptor_bytes else 1.0)
        return self.lnc * min(self.hbm_bytes_per_s / self.physical_cores, dma) * self.efficiencies.hbm

    def hbm_transfer_s(self, nbytes, descriptor_bytes=None):
        """Seconds for one core to move `nbytes` between HBM and SBUF (hbm_bytes_per_s_reached)."""
        return nbytes / self.hbm_bytes_per_s_reached(descriptor_bytes)

    @property
    def host_link_bytes_per_s(self):
        """Host <-> device copies of a fallback go through one DMA queue per physical core."""
        return self.lnc * self.core.dma_sustained_bytes_per_ns * 1e9

    @property
    def neuronlink_bytes_per_s_per_direction(self):
        """One link, one direction: the per-chip figure counts every link both ways."""
        return self.neuronlink_bytes_per_s / self.neuronlink_links / 2

    @property
    def efa_bytes_per_s(self):
        return self.efa_bits_per_s / 8


NC_V2 = NeuronCore(   # [nc-v2-arch]; DMA rates [dma-overview], [dma-bw]
    name="gen2", chip="Trn1",
    clock_ghz={"tensor": 2.8, "vector": 1.12, "scalar": 1.4, "gpsimd": 1.4},
    pe_array=128, vector_lanes=128,
    sbuf_partition_bytes=192 * KIB, sbuf_reserved_bytes=16 * KIB,   # 24 MiB SBUF
    dma_peak_bytes_per_ns=27.2, dma_sustained_bytes_per_ns=17.0,    # 16 x 17 B/ns = 272 GB/s per core
    gemm_moving_fmax_fp32_dst=512, gemm_moving_fmax_bf16_dst=512)
NC_V3 = NeuronCore(   # [nc-v3-arch]; DMA rates [dma-overview], [dma-bw]
    name="gen3", chip="Trn2",
    clock_ghz={"tensor": 2.4, "vector": 0.96, "scalar": 1.2, "gpsimd": 1.2},
    pe_array=128, vector_lanes=128,
    sbuf_partition_bytes=224 * KIB, sbuf_reserved_bytes=0,          # 28 MiB SBUF
    dma_peak_bytes_per_ns=27.2, dma_sustained_bytes_per_ns=23.0,    # 368 GB/s per core
    gemm_moving_fmax_fp32_dst=512, gemm_moving_fmax_bf16_dst=512,
    features=frozenset({"scalar_alu", "scalar_bias_immediate", "vector_perf_mode"}))
NC_V4 = NeuronCore(   # [nc-v4-arch]; DMA rates [dma-overview], [dma-bw]; moving fmax [isa]
    name="gen4", chip="Trn3",
    clock_ghz={"tensor": 2.4, "vector": 1.2, "scalar": 1.2, "gpsimd": 1.2},
    pe_array=128, vector_lanes=128,
    sbuf_partition_bytes=256 * KIB, sbuf_reserved_bytes=0,          # 32 MiB SBUF
    dma_peak_bytes_per_ns=38.4, dma_sustained_bytes_per_ns=33.0,    # 528 GB/s per core
    gemm_moving_fmax_fp32_dst=4096, gemm_moving_fmax_bf16_dst=8192,
    features=frozenset({"scalar_alu", "scalar_bias_immediate", "vector_perf_mode", "exponential",
                        "bf16_psum", "fp8_fn"}))

CHIPS = {
    # trn1.32xlarge: 16 Trainium chips of 2 NeuronCore-v2 (LNC=1), 32 GiB HBM at 820 GiB/s per chip,
    # NeuronLink-v2 x4 at 384 GB/s per chip, EFA 800 Gbps per instance (190 BF16 TFLOPS per chip published;
    # the model uses the per-core engine figure, 128 x 128 PEs x 2 FLOP x 2.8 GHz = 91.75 TFLOPS).
    # [trainium] chip, [trn1-arch] instance; LNC=1 derived: [lnc] documents LNC=2 for Trn2 and Trn3, none for Trn1.
    "trn1": Chip(name="trn1", core=NC_V2, physical_cores=2, lnc=1, chips_per_instance=16,
                 hbm_bytes=32 * GIB, hbm_bytes_per_s=820 * GIB, neuronlink_bytes_per_s=384e9, neuronlink_links=4,
                 efa_bits_per_s=800e9),
    # trn2.48xlarge: 16 Trainium2 chips of 8 NeuronCore-v3 (LNC=2: 4 logical cores), 96 GiB at 2.9 TB/s,
    # NeuronLink-v3 x4 at 1.28 TB/s per chip, EFAv3 3,200 Gbps. [trainium2] chip, [lnc], [trn2-arch] instance.
    "trn2": Chip(name="trn2", core=NC_V3, physical_cores=8, lnc=2, chips_per_instance=16,
                 hbm_bytes=96 * GIB, hbm_bytes_per_s=2.9e12, neuronlink_bytes_per_s=1.28e12, neuronlink_links=4,
                 efa_bits_per_s=3200e9),
    # Trn3 (Gen1 UltraServer server of 16 chips): 8 NeuronCore-v4 per chip, 144 GiB at 4.9 TB/s,
    # NeuronLink-v4 x4 at 2.56 TB/s per chip, 12,800 Gbps EFA per 64 chips (3,200 per 16).
    # [trainium3] chip, [lnc]; [trn3-arch] UltraServer (16 chips a server; EFA per 16 chips derived: 12,800 / 4).
    "trn3": Chip(name="trn3", core=NC_V4, physical_cores=8, lnc=2, chips_per_instance=16,
                 hbm_bytes=144 * GIB, hbm_bytes_per_s=4.9e12, neuronlink_bytes_per_s=2.56e12, neuronlink_links=4,
                 efa_bits_per_s=3200e9),
}

NEURON_CORES = {chip.core.name: chip.core for chip in CHIPS.values()}


def chip(name: str) -> Chip:
    key = str(name).strip().lower()
    if key not in CHIPS:
        raise ValueError(f"unknown Trainium target {name!r}; choose one of {sorted(CHIPS)}")
    return CHIPS[key]
