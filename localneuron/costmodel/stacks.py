"""The software stack an estimate prices (`localneuron estimate --stack`), and what it reaches of the hardware:
a few physical efficiencies per generation, fitted on the published rows that ran it.

Invariant: a piece of work is priced with the efficiencies of the stack its target names (Chip.stack), read
here when it is priced; the fitted values live in one generated table (fitted_table.py, with the
rows that fixed them), which benchmarks/calibration.py refits and rewrites. Nothing else holds a fitted
efficiency. The `neuron` device prices its work as the default stack runs it, the same numbers
`localneuron estimate` gives by default.
"""
import contextlib
import math
from dataclasses import dataclass

from localneuron.costmodel import fitted_table

DEFAULT = "torchneuron"
GENERATIONS = ("trn1", "trn2", "trn3")


@dataclass(frozen=True)
class Parameter:
    """One physical efficiency: its bounds (outside them it would be a different machine, not a slower
    program), the value that leaves the published figures as they are, and the kinds of published row
    whose times it moves enough to be fitted on."""
    low: float
    high: float
    neutral: float
    kinds: tuple
    meaning: str


PARAMETERS = {
    # below a fifth of a well-blocked kernel's rate a stack would not be tiling for TensorE at all: a different
    # algorithm (a term the model lacks), not an efficiency
    "matmul": Parameter(0.2, 1.0, 1.0, ("train", "prefill"),
                        "the fraction of the NKI cycle model's rate for a GEMM's shape (a well-blocked kernel) that the "
                        "stack's compiled GEMMs reach"),
    "hbm": Parameter(0.3, 1.0, 1.0, ("decode",),
                     "the fraction of a core's HBM reach (its DMA queues' sustained rate, or its share of the chip's "
                     "bandwidth when lower) that the stack's graphs sustain"),
    # a server's own work on a request (tokenising, scheduling, the round trip) is milliseconds to tens of them
    "request_s": Parameter(0.0, 0.1, 0.0, ("prefill",),
                           "seconds a request spends in the serving stack before its first token's forward runs "
                           "(scheduling, tokenisation, the client's round trip)"),
    # a decode step's layers wait on each other through the runtime (a semaphore per dependency, the collectives'
    # start): microseconds to tens of them per layer, never a millisecond
    "decode_layer_s": Parameter(0.0, 1e-4, 0.0, ("decode",),
                                "seconds each layer adds to a decode step beyond its priced work and collectives (the "
                                "runtime's synchronisation between the layer's graphs and engines)"),
}


@dataclass(frozen=True)
class Efficiencies:
    matmul: float = PARAMETERS["matmul"].neutral
    hbm: float = PARAMETERS["hbm"].neutral
    request_s: float = PARAMETERS["request_s"].neutral
    decode_layer_s: float = PARAMETERS["decode_layer_s"].neutral


@dataclass(frozen=True)
class Stack:
    """A stack a user can name: what it is, and the published rows that stand for it, as (population, kinds):
    the populations are the software the rows' sources name (benchmarks/calibration.py's stack_of()).
    `pads_to_compiled_length`: a served model's graphs were compiled for one sequence length only (no buckets), so
    every prompt is encoded padded to that length and every decode step attends over the whole compiled cache
    (compiled_tokens()).
    `moe_prefill_block`: the stack encodes a prompt's mixture-of-experts layers block by block (moe_prefill_blocks()):
    the routed tokens are laid out in blocks of this many rows, one expert's to a block, sized for the worst routing,
    and every block runs whole; None: the experts run one grouped GEMM over the tokens routed to them.
    `materialises_prompt_scores`: the stack encodes a prompt with no fused attention kernel: the scores of every
    query position against every key (each kv head repeated for its query heads) are computed whole, masked, run
    through a softmax and multiplied by the values, each a separate op of the graph; False: the fused kernel.
    `context_buckets`: whose default context-encoding buckets the stack compiles (context_buckets()): a prompt is
    encoded padded to the smallest bucket that holds it (prompt_tokens()); None: at its own length."""
    description: str
    stands_for: tuple
    tuned: bool
    pads_to_compiled_length: bool = False
    moe_prefill_block: int | None = None
    materialises_prompt_scores: bool = False
    context_buckets: str | None = None


STACKS = {
    DEFAULT: Stack("a tuned TorchNeuron recipe: compiled graphs, fused attention, Megatron-style parallelism; AWS's "
                   "tuned libraries' published rows stand for it (NeuronX Distributed and NeMo-Megatron training, NxD "
                   "Inference serving, Transformers NeuronX token generation)",
                   (("nxd", ("train",)), ("nemo-megatron", ("train",)), ("nxd-inference", ("prefill", "decode")),
                    ("transformers-neuronx", ("decode",))), tuned=True, context_buckets="nxd-inference"),
    # Transformers NeuronX 0.10 (SDK 2.18.0 and 2.18.1: aws-neuron/transformers-neuronx 7a30b42 and 0623de2) encodes
    # a prompt with plain HLO, in either attention layout (layers/attention.py, BSH; attention_hsb.py, HSB): score()
    # repeats the kv heads (hlo.repeat_kv) and takes S = Q K^T whole, mask() selects -30000 where masked,
    # context_combined() runs hlo.softmax (max, subtract, exp, sum, divide in the scores' dtype), casts and takes
    # softmax(S) V (llama/hlo.py LlamaForSamplingNoEmbeddingHlo.attention, "Multi-Token Context Encoding"); the
    # library has no flash attention kernel at that version.
    # Not priced, and not explained: the SDK 2.18 Llama-2 and CodeLlama samples (aws-neuron-samples
    # torch-neuronx/transformers-neuronx/inference, 0815eb2) leave NeuronConfig at its defaults, so attention_layout
    # HSB (config.py at 7a30b42), where the Llama-3 samples (22c6cac) set BSH; their long prompts (2,048 tokens and
    # more) ran slower than this prices by 0.3-0.4 ns per attention-score element per rank and layer, in 13B and 70B
    # alike (per token the two models disagree; 1,024 tokens show no excess, as if scores spilled from SBUF past
    # some size). The attention core is the same HLO in both layouts and the release between them changed nothing
    # of context encoding, so no mechanism is known to price: the rows stay judged as they are.
    "transformers-neuronx": Stack("Transformers NeuronX as its SDK 2.18 sample scripts run it on trn1, context "
                                  "encoding included: long prompts of its Llama-2 samples ran 1.6-4.5x slower than "
                                  "the same library's Llama-3 samples of the same shape one release later",
                                  (("transformers-neuronx", ("prefill", "decode")),), tuned=False,
                                  materialises_prompt_scores=True, context_buckets="transformers-neuronx"),
    # optimum-neuron's NxD backend compiles its context-encoding and token-generation graphs for one length: its
    # models' _get_neuron_config never sets enable_bucketing, which NxDNeuronConfig defaults to False, and without it
    # create_context_encoding_wrapper and create_token_generation_wrapper take generate_buckets(sequence_length,
    # sequence_length), the one bucket of the compiled sequence length (huggingface/optimum-neuron,
    # optimum/neuron/models/inference/backend/config.py and .../modules/decoder/modeling_decoder.py).
    # Its MoE layers are NxD's ExpertMLPs (backend/modules/moe.py; Llama-4: moe_v2.py's ExpertMLPsV2) with no
    # capacity factor (NxDNeuronConfig's capacity_factor defaults to None: dropless), and NxD (0.13, pinned by its
    # September 2025 releases; 0.15, by its October ones) encodes a prompt whose tokens x top_k reach the block size
    # through forward_blockwise: ceil((T k - (E - 1)) / B) + E - 1 blocks of B = DEFAULT_BLOCK_SIZE = 512 rows, the
    # worst case of the routing, each run whole through its expert (aws-neuron/neuronx-distributed,
    # src/neuronx_distributed/modules/moe/expert_mlps_v2.py and model_utils.py; no dynamic block skipping by
    # default, moe_configs.py)
    "optimum-neuron": Stack("Hugging Face optimum-neuron's vLLM server (`optimum-cli neuron serve`): its graphs are "
                            "compiled for one sequence length, so a prompt is encoded padded to it and each decode "
                            "step attends over all of it",
                            (("optimum-neuron", ("prefill", "decode")),), tuned=False, pads_to_compiled_length=True,
                            moe_prefill_block=512),
    "megatron-lm-reference": Stack("AWS's early reference port of Megatron-LM (Neuron SDK 2.5-2.6)",
                                   (("megatron-lm-reference", ("train",)),), tuned=False),
    "hf-torch-neuronx": Stack("Hugging Face Trainer scripts on torch-neuronx, data parallel only",
                              (("hf-torch-neuronx", ("train",)),), tuned=False),
}


def check(name: str) -> str:
    """`name` if it is a stack; a ValueError listing the stacks otherwise."""
    if name not in STACKS:
        raise ValueError(f"unknown --stack {name!r}; choose one of: " + ", ".join(
            f"{stack}{' (default)' if stack == DEFAULT else ''}" for stack in STACKS))
    return name


def compiled_tokens(stack: str, tokens: int, compiled_seq: int | None) -> int:
    """The positions a served model's graph runs for `tokens` (a prompt's, or a decode step's context): the
    compiled sequence length when `stack` compiles its graphs for that one length (Stack.pads_to_compiled_length)
    and the request names it (`compiled_seq`), else `tokens` as the request brings them."""
    if compiled_seq and STACKS[check(stack)].pads_to_compiled_length:
        return max(tokens, compiled_seq)
    return tokens


def moe_prefill_blocks(stack: str, tokens: int, experts: int, per_token: int) -> tuple[int, int] | None:
    """(blocks, rows of each) that a prompt's `tokens` tokens (every sequence's) take through a mixture-of-experts
    layer of `experts` experts, each token routed to `per_token`, when `stack` encodes it block by block
    (Stack.moe_prefill_block): enough blocks for the worst routing, every expert but one holding a single token's
    block. None when the stack does not, or the routed tokens fill less than one block (NxD then runs them through
    every expert)."""
    block = STACKS[check(stack)].moe_prefill_block
    routed = tokens * per_token
    if block is None or routed < block:
        return None
    return min(math.ceil((routed - (experts - 1)) / block) + experts - 1, routed), block


def judged_by(population: str, kind: str) -> list[str]:
    """The stacks a published row of `population` and `kind` stands for."""
    return [name for name, stack in STACKS.items() if any(p == population and kind in kinds
                                                         for p, kinds in stack.stands_for)]


_fitted = fitted_table.EFFICIENCIES
_resolved: dict = {}   # (stack, generation) -> Efficiencies, and None -> values(): both cleared when the table changes


def _nearest(generation: str) -> list[str]:
    """Generations by distance from `generation`, the older first on a tie."""
    index = GENERATIONS.index(generation) if generation in GENERATIONS else len(GENERATIONS)
    return sorted(GENERATIONS, key=lambda g: (abs(GENERATIONS.index(g) - index), GENERATIONS.index(g)))


def _lookup(stack: str, generation: str, parameter: str) -> float:
    """The fitted value for the stack on the nearest generation that fixed it; else the default stack's, the same
    way (a stack differs from the tuned recipe only where its rows say so); else the neutral value."""
    for name in (stack, DEFAULT):
        for g in _nearest(generation):
            value = _fitted.get(name, {}).get(g, {}).get(parameter)
            if value is not None:
                return value
    return PARAMETERS[parameter].neutral


def efficiencies(stack: str, generation: str) -> Efficiencies:
    """What `stack` reaches of `generation`'s hardware."""
    key = (stack, generation)
    if key not in _resolved:
        _resolved[key] = Efficiencies(**{p: _lookup(check(stack), generation, p) for p in PARAMETERS})
    return _resolved[key]


def values() -> tuple:
    """The fitted table as it stands (what a priced result depends on: a cache key, asked at every price)."""
    if None not in _resolved:
        _resolved[None] = tuple(sorted((s, g, p, v) for s, per in _fitted.items() for g, fitted in per.items()
                                       for p, v in fitted.items() if p in PARAMETERS))
    return _resolved[None]


@contextlib.contextmanager
def refitted(table: dict):
    """Price with `table` (stack -> generation -> parameter -> value) in place of the fitted one: the
    calibration's refits."""
    global _fitted
    saved = _fitted
    _fitted = table
    _resolved.clear()
    try:
        yield
    finally:
        _fitted = saved
        _resolved.clear()


def context_buckets(rule: str, compiled_seq: int) -> list[int]:
    """The prompt lengths a library compiles its context-encoding graph for by default, given the longest context it
    was compiled for. NxD Inference with bucketing enabled (aws-neuron/neuronx-distributed-inference,
    modules/autobucketing.py generate_buckets(128, max_context_length)): the powers of two from 128 up to the one
    nearest log2 of the maximum, then the maximum; Transformers NeuronX (bucket.context_sizes over the n_positions
    token buckets): half of each power-of-two token bucket from 128, and half the maximum."""
    if rule == "nxd-inference":
        if compiled_seq <= 128:
            return [compiled_seq]
        return [2 ** i for i in range(7, round(math.log2(compiled_seq)))] + [compiled_seq]
    if rule == "transformers-neuronx":
        tokens, size = [], 128
        while size < compiled_seq:
            tokens.append(size)
            size *= 2
        return [t // 2 for t in tokens + [compiled_seq]]
    raise ValueError(rule)


def prompt_tokens(stack: str, tokens: int, compiled_seq: int | None) -> int:
    """The positions a prompt of `tokens` is encoded at, given the longest context the graphs were compiled for
    (`compiled_seq`; None: not given, the prompt as it comes): that length for a stack compiled for it alone, else
    the smallest of the stack's context buckets that holds the prompt (context_buckets())."""
    if compiled_seq and STACKS[check(stack)].pads_to_compiled_length:
        return max(tokens, compiled_seq)
    rule = STACKS[check(stack)].context_buckets
    if not (rule and compiled_seq):
        return tokens
    return next((b for b in context_buckets(rule, compiled_seq) if b >= tokens), tokens)
