"""What the cost model assumes about "well-compiled" code: the only constants that are not published
hardware figures, in one place. Each is physical (a rate, a latency, a scheduling rule), none is a
per-model factor; docs/calibration.md shows what they give against published Trainium results, and
which published rows fixed each number. The cost model reads them at call time (assumptions.NAME),
so benchmarks/calibration.py can refit them in its cross-validation.
"""
from localneuron.costmodel import fitted_table

# A collective costs a start (the collective engines of every rank hand-shake before data moves) and
# one latency per algorithm step (a DMA transfer and the semaphore its peer waits on); one issued on
# its own (an eager c10d call, nccom-test) also pays a launch, in which the runtime arms its DMA rings
# on every rank, where a compiled graph's collectives come armed. All three are fitted to the published
# rows together (benchmarks/calibration.py): the nccom-test rows weigh the launch and the steps (a
# 2-rank all-reduce of 1 KiB takes 58 us, a 32-rank all-gather of 1 KiB 151 us), the decode rows, two
# small all-reduces per layer, the start and the steps. Their values are fitted_table.py's.
COLLECTIVE_LAUNCH_S = fitted_table.COLLECTIVES["COLLECTIVE_LAUNCH_S"]
COLLECTIVE_START_S = fitted_table.COLLECTIVES["COLLECTIVE_START_S"]
COLLECTIVE_STEP_S = fitted_table.COLLECTIVES["COLLECTIVE_STEP_S"]

# Between instances a step also pays the network: EFA's one-way message latency (AWS quotes 'around
# 15 us' for SRD; not in the notes).
EFA_LATENCY_S = 15e-6



def values() -> tuple:
    """The numeric assumptions as they stand (what a priced result depends on)."""
    return tuple((name, value) for name, value in sorted(globals().items())
                 if name.isupper() and isinstance(value, float))


# Scheduling rules (no numbers), shown with the calibration:
RULES = (
    "Within one op, its engines and its DMA pipeline: the op costs the slowest of them.",
    "A compiled graph is one launch, tiled along its rows: an intermediate stays on chip however large, "
    "so only the graph's inputs (read once) and outputs (results, activations saved for the backward, "
    "gradients) cross HBM; a data-movement op reads no more than it writes.",
    "Consecutive element-wise ops of a graph are one fused loop: VectorE, ScalarE and GpSimd work on its "
    "tiles at once, so the loop costs its busiest engine; a dtype conversion rides along in its neighbour.",
    "Matmuls, attention and fused loops of one graph follow each other: the graph costs their sum.",
    "An eager op is one launch that reads its inputs from HBM and writes its outputs to it.",
    "A core reaches HBM through its 16 DMA queues at their published sustained rate, or its share of "
    "the chip's HBM bandwidth if that is lower.",
    "Collectives are not overlapped with compute: Megatron tensor-parallel collectives sit between "
    "dependent matmuls, and the data-parallel gradient reduction runs after the last micro-batch.",
    "A ring collective within an instance runs over one NeuronLink per direction (a ring enters and leaves "
    "each chip once); between instances it runs over EFA, shared by every group crossing the instance.",
    "An all-reduce uses recursive doubling (log2 n steps, each exchanging the whole buffer) when that is "
    "faster than the ring (2 (n-1) steps moving 2 (n-1)/n of it): small messages; all-gather and "
    "reduce-scatter use the ring.",
    "Gradients accumulate in fp32 over the micro-batches: each backward reads and writes the accumulator.",
    "A decode step appends one token to the KV cache, so the cache lies token by token in HBM and reading it "
    "uses DMA descriptors of one token's keys (or values) of the core's heads: below 4 KiB they run under the "
    "sustained rate by the per-descriptor cost the 4 KiB figure implies (the NKI DMA bandwidth guide, "
    "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/deep-dives/nki-dma-bandwidth-guide.html; "
    "the NKI cycle model's rule).",
)
