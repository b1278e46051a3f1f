"""Published per-instruction cycle rules that both the NKI cycle model and the op/graph cost model use:
one formula for a TensorE tile, one floor for engine instructions.

Sources (RTD/ = https://awsdocs-neuron.readthedocs-hosted.com/en/latest/, the AWS Neuron documentation):
  [nc-v2-arch] RTD/nki/guides/architecture/trainium_inferentia2_arch.html (NKI architecture guide, NeuronCore-v2)
  [isa-2.26]   https://github.com/aws-neuron/aws-neuron-sdk/blob/v2.26.1/nki/api/nki/isa/__init__.py (cost tables)
  [perf-guide] RTD/nki/deep-dives/nki_perf_guide.html
"""
import math

MIN_II = 64              # minimum initiation interval of Vector/Scalar instructions ([nc-v2-arch], [isa-2.26])
GPSIMD_START = 150       # GpSimd start-up cost per instruction ([isa-2.26])
MM_INIT_LATENCY = 64     # TensorE floor per MultiplyMoving ([nc-v2-arch], [isa-2.26] nc_matmul)
# Extra time before a dependent instruction can consume a result (semaphore, access setup,
# pipeline drain). 200 cycles makes dependent one-element ScalarE instructions issue every
# 264 cycles = 189 ns on gen2, as measured in the NKI performance guide [perf-guide] (derived: fitted to it).
DEPENDENCY_LATENCY = 200
MOVING_FREE_MAX = 512    # one PSUM bank holds 512 fp32 accumulators per partition


def matmul_instruction(moving_free, stationary_free, fp32_inputs, fp32_slowdown=4):
    """Cycles of one LoadStationary + MultiplyMoving pair; the LoadStationary runs in the background,
    so the pair costs the larger of the two."""
    cycles = max(min(MM_INIT_LATENCY, stationary_free), moving_free, MM_INIT_LATENCY)
    return cycles * fp32_slowdown if fp32_inputs else cycles


def gemm_cycles(m, k, n, fp32_inputs, pe=128, fp32_slowdown=4):
    """TensorE cycles of an [m, k] @ [k, n] product tiled the NKI way: k and the stationary free
    dimension in pe-sized tiles, the moving operand streamed in PSUM-bank chunks. The operand with
    the larger free size moves (the published advice), so small m costs the 64-cycle floor per tile."""
    def tiled(stationary, moving):
        full, rest = divmod(moving, MOVING_FREE_MAX)
        per_stationary = full * matmul_instruction(MOVING_FREE_MAX, pe, fp32_inputs, fp32_slowdown)
        if rest:
            per_stationary += matmul_instruction(rest, pe, fp32_inputs, fp32_slowdown)
        return math.ceil(k / pe) * math.ceil(stationary / pe) * per_stationary
    return min(tiled(m, n), tiled(n, m))


def elementwise_cycles(elements, partitions=128):
    """One pass of a Vector/Scalar/GpSimd instruction over `elements` spread across the partitions."""
    return max(MIN_II, math.ceil(elements / partitions))


def row_cycles(rows, row_length, partitions=128):
    """One pass along rows (a reduction or normalisation over the last axis): one row per partition."""
    return math.ceil(rows / partitions) * max(MIN_II, row_length)
