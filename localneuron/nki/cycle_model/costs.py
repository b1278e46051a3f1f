"""Published per-instruction cycle rules, in engine cycles: the NKI architecture guide
(https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/guides/architecture/trainium_inferentia2_arch.html)
and the legacy nki.isa cost tables
(https://github.com/aws-neuron/aws-neuron-sdk/blob/v2.26.1/nki/api/nki/isa/__init__.py).

N is the number of elements per partition an instruction processes. Each function returns
the instruction's initiation interval on its engine: the time the engine is busy, which is
what bounds throughput on a deeply pipelined NeuronCore. The rules the op/graph cost model also
uses (TensorE tiles, the instruction floors) live in localneuron.costmodel.tiles.
"""
from localneuron.costmodel.tiles import DEPENDENCY_LATENCY, GPSIMD_START, MIN_II, MM_INIT_LATENCY  # noqa: F401
from localneuron.costmodel.tiles import matmul_instruction as matmul  # noqa: F401

ACCUMULATOR_READ = 64    # ScalarE ActReadAccumulator when a reduction result is written out


def pe_transpose(partitions, free):
    return max(partitions, min(MM_INIT_LATENCY, free))


def vector_tensor_tensor(n, psum_operand, fast_bf16):
    return max(MIN_II, n if (psum_operand or fast_bf16) else 2 * n)


def vector_single_input(n):
    """tensor_scalar, tensor_copy, vector transpose, select: one input stream."""
    return max(MIN_II, n)


def vector_reduce(n, bf16_add_or_max):
    return max(MIN_II, n // 2 if bf16_add_or_max else n)


def memset(n, zero_into_16bit):
    return max(MIN_II, n // 2 if zero_into_16bit else n)


def activation(n, reads_accumulator):
    return max(MIN_II, n) + (ACCUMULATOR_READ if reads_accumulator else 0)


def exponential(n, reads_accumulator):
    # gen4 Vector exponential runs at 4x the throughput of a ScalarE exp activation.
    return max(MIN_II, n // 4) + (ACCUMULATOR_READ if reads_accumulator else 0)


def gpsimd(n):
    return GPSIMD_START + n


# gen3+ Vector "performance mode" for 16-bit floats: speed-up by instruction and operand placement.
PERF_MODE_SPEEDUP = {
    ("tensor_copy", "sbuf"): 4, ("tensor_copy", "psum"): 2,
    ("tensor_scalar", "sbuf"): 4, ("tensor_scalar", "psum"): 2,
    ("tensor_tensor", "sbuf"): 2,
}


def perf_mode_speedup(opcode, operands, target):
    """Speed-up of the Vector perf mode, 1 when it does not apply."""
    if not target.has("vector_perf_mode"):
        return 1
    if not all(t.dtype.name in ("bfloat16", "float16") for t in operands):
        return 1
    placement = "psum" if any(t.buffer.name == "psum" for t in operands) else "sbuf"
    return PERF_MODE_SPEEDUP.get((opcode, placement), 1)


STRIDE_PENALTY_BYTES = 16


def strided_access_factor(tiles):
    """SBUF/PSUM ports move half as many elements per cycle when an operand's innermost
    free-axis stride exceeds 16 bytes."""
    for t in tiles:
        if t.buffer.on_chip and t.ndim > 1 and t.shape[-1] > 1 and t.strides[-1] * t.dtype.itemsize > STRIDE_PENALTY_BYTES:
            return 2
    return 1
