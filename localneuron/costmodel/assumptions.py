"""What the cost model assumes about "well-compiled" code: the only constants that are not published
hardware figures, in one place. Each is physical (a rate, a latency, a scheduling rule), none is a
per-model factor; docs/calibration.md shows what they give against published Trainium results.
"""

# TensorE sustains this fraction of the tile-level matmul rate on large, well-blocked matmuls:
# the NKI matmul tutorial's fully blocked kernel reaches 85.24% of the NeuronCore-v2 peak
# (reference notes §7.5); the remaining 15% are DMA waits and PSUM evictions that no schedule hides.
TENSOR_ENGINE_EFFICIENCY = 0.85

# An intermediate of a compiled graph stays in SBUF when it fits in this share of it (the rest holds
# the operand tiles being streamed); larger ones are written to HBM and read back (spilled).
SBUF_SHARE_FOR_INTERMEDIATES = 0.5

# Each step of a collective algorithm is one DMA transfer with its semaphore: it pays the published
# fixed DMA latency (1.3 us, reference §8.6) within an instance. Between instances a step also pays
# the network: EFA's one-way message latency (AWS quotes 'around 15 us' for SRD; not in the notes).
EFA_LATENCY_S = 15e-6

# Scheduling rules (no numbers), shown with the calibration:
RULES = (
    "Within one op, its engines and its DMA pipeline: the op costs the slowest of them.",
    "Between the ops of one graph the compiler does not overlap: a graph costs the sum of its ops, "
    "so element-wise work and spilled intermediates add to matmul time instead of hiding behind it.",
    "A compiled graph is one launch; only its inputs, its outputs and intermediates too large for SBUF "
    "cross HBM. An eager op is one launch that reads its inputs from HBM and writes its outputs to it.",
    "A core reaches HBM through its 16 DMA queues at their published sustained rate, or its share of "
    "the chip's HBM bandwidth if that is lower.",
    "Collectives are not overlapped with compute: Megatron tensor-parallel collectives sit between "
    "dependent matmuls, and the data-parallel gradient reduction runs after the last micro-batch.",
    "A ring collective within an instance runs over one NeuronLink per direction per chip (a ring enters and "
    "leaves each chip once); between instances it runs over EFA, shared by every group crossing the instance.",
    "Gradients accumulate in fp32 over the micro-batches: each backward reads and writes the accumulator.",
    "Small collectives use a tree when it is faster than the ring (latency log2(n) steps instead of n).",
    "A decode step appends one token to the KV cache, so the cache lies token by token in HBM and reading it "
    "uses DMA descriptors of one token's keys (or values) of the core's heads: below 4 KiB they run under the "
    "sustained rate by the per-descriptor cost the 4 KiB figure implies (reference §8.6; the NKI cycle model's rule).",
)
