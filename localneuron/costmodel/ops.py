"""Time of eager ops and of compiled graphs on one logical NeuronCore.

Eager: every op is its own executable (one launch), reads its inputs from HBM and writes its outputs
back. Compiled: a graph is one launch, tiled along its rows: only its inputs and outputs cross HBM, and
consecutive element-wise ops run as one loop whose engines overlap (assumptions.py). A CPU fallback
pays two launches and the host link both ways. eager_op is the one price of an eager op (work.price_op
records it for the device's executables, eager_sequence sums it for a traced forward), and copied the one
price of a copy (work.price_copy).
"""
from dataclasses import dataclass

import torch

from localneuron.costmodel import engines, tiles
from localneuron.costmodel.engines import OpWork, op_work, tensor_bytes
from localneuron.costmodel.hardware import Chip
from localneuron.costmodel.time import Breakdown


def moved_bytes(inputs: list, outputs: list) -> int:
    """What an eager op moves through HBM: it reads every input and writes every output."""
    return sum(tensor_bytes(t) for t in inputs) + sum(tensor_bytes(t) for t in outputs)


def eager_op(chip: Chip, name: str, inputs: list, outputs: list, on_host: bool = False,
             work: OpWork | None = None) -> Breakdown:
    """One eager op, an executable of its own, while its engines are busy for `work` (op_work's, computed here
    unless the caller has it); a CPU fallback pays the host link instead."""
    if on_host:
        return launched(chip, moved_bytes(inputs, outputs), on_host=True)
    work = work if work is not None else op_work(chip, name, inputs, outputs)
    return launched(chip, moved_bytes(inputs, outputs), work.compute_s)


def copied(chip: Chip, nbytes: int, within: bool = True) -> Breakdown:
    """A copy of nbytes, read once and written once: within HBM, or over the host link (a launch each way)."""
    return launched(chip, 2 * nbytes, on_host=not within)


def launched(chip: Chip, moved: int, compute: float = 0.0, on_host: bool = False) -> Breakdown:
    """One executable that moves `moved` bytes through HBM while its engines are busy for `compute` seconds; on the
    host (a CPU fallback, a copy between host and device), two launches and the host link instead."""
    if on_host:
        return Breakdown(launches=2 * chip.launch_overhead_s, host=moved / chip.host_link_bytes_per_s)
    memory = moved / chip.memory_bytes_per_s_per_core
    return Breakdown(compute=compute, memory=max(0.0, memory - compute), launches=chip.launch_overhead_s)


def eager_seconds(chip: Chip, name: str, inputs: list, outputs: list, on_host: bool = False) -> float:
    return eager_op(chip, name, inputs, outputs, on_host).total


def _in_graph(chip: Chip, work: OpWork, memory: float) -> Breakdown:
    """A unit of a compiled graph (an op, or a fused loop of element-wise ops) whose engines are busy
    for `work` and whose HBM traffic takes `memory` seconds: no launch of its own; its engines wait on
    their dependency latency, a transfer on the fixed DMA latency."""
    compute = work.compute_s
    if compute > 0:
        compute += tiles.DEPENDENCY_LATENCY / (chip.core.clock_ghz[work.busiest] * 1e9)
    if memory > 0:
        memory = max(memory, chip.core.dma_fixed_latency_ns * 1e-9)
    return Breakdown(compute=compute, memory=max(0.0, memory - compute))


def fused_seconds(chip: Chip, name: str, inputs: list, outputs: list, on_host: bool = False) -> float:
    """The op as one node of a compiled graph whose operands are intermediates of the graph: nothing
    crosses HBM (what compiling the op's neighbourhood would give)."""
    if on_host:
        return eager_seconds(chip, name, inputs, outputs, on_host)
    return _in_graph(chip, op_work(chip, name, inputs, outputs), 0.0).total


EXECUTABLE, COPY, NOTHING = "executable", "copy", "nothing"


@dataclass(frozen=True)
class GraphOp:
    """One op of a graph: its name, and its operands as (tensor key, tensor) pairs; keys say which
    operands are the same tensor (a storage), so the graph knows what is produced inside it. `issued`:
    what the device issues for it when it runs eagerly (an executable; a copy within HBM of its outputs'
    bytes; nothing, for an allocation or an op the device runs as a view; or the name of the in-place op it
    runs on its outputs, aten::zero_ for aten::zeros), which only eager_issues reads: a compiled graph
    prices every op by its rule."""
    name: str
    inputs: tuple
    outputs: tuple
    on_host: bool = False
    issued: str = EXECUTABLE


def _fuses(name: str) -> bool:
    """Element-wise, row-wise and data-movement ops join a fused loop; matmuls, attention and whole kernels do not."""
    return not isinstance(engines.rule(name), (engines.Matmul, engines.Attention, engines.MoePrefillBlocks))


# The dtypes TensorE multiplies as they are, on every generation (source keys as in hardware.py): nc_matmul takes
# float8_e4m3 / float8_e5m2, bfloat16, float16, tfloat32 and float32 inputs ([isa-2.26] nc_matmul); Trainium publishes
# cFP8 at its BF16 rate [trainium], and NeuronCore-v3/v4 double it only when both operands are fp8 (nc_matmul's
# double_row mode), which a bf16 activation times an fp8 weight is not. torch has no float8_e4m3, so float8_e4m3fn
# stands for the 8-bit float a weight is stored in. No integer type is among them: a matrix stored as int8 must be
# widened by another engine before TensorE can read it.
MATMUL_INPUTS = frozenset({torch.float8_e4m3fn, torch.float8_e5m2, torch.bfloat16, torch.float16, torch.float32})
# what widening a weight-only quantized matrix is: one VectorE pass over its elements, the multiply by its
# per-channel scale converting as it reads (widening())
DEQUANTISE = engines.Elementwise(vector=1)


def widening(chip: Chip, weight: torch.Tensor, stored: torch.dtype) -> OpWork:
    """The engine work that makes `weight` (a graph input kept in HBM as `stored`, computed with in weight.dtype)
    something TensorE can read. No work when TensorE takes `stored` as it is (MATMUL_INPUTS: fp8): the per-channel
    scale then multiplies the product, one row of the output per channel, in the copy out of PSUM that runs anyway.
    Otherwise (int8) weight-only dequantisation, real work on an engine: every stored element converted to the
    compute dtype, multiplied by its output channel's scale and written to SBUF for TensorE. Priced as one VectorE
    tensor_scalar per tile, the instruction that multiplies by a per-partition operand (the channel on the
    partition axis) and converts as it reads: one input stream, one element per partition per cycle ([isa-2.26]
    tensor_scalar; the gen3+ Vector performance mode needs 16-bit float operands, so an int8 source runs without
    it). ScalarE's activation with a scale operand costs the same cycles per element; the model does not assume
    the compiler splits the pass between the two engines. DEQUANTISE is that pass: one VectorE pass over the
    elements, the conversion riding in its read."""
    if stored in MATMUL_INPUTS:
        return OpWork()
    return engines.rule_work(chip, DEQUANTISE, [weight], [weight])


class _Loop:
    """Consecutive fusible ops of a graph: one loop over row tiles in which VectorE, ScalarE, GpSimd and
    the DMA queues work at once, so the loop costs its busiest engine (or its HBM traffic)."""
    def __init__(self):
        self.work, self.memory, self.converts, self.computes = OpWork(), 0.0, OpWork(), False

    def add(self, rule, work: OpWork, memory: float) -> None:
        """Work priced by `rule` (an op's engines.rule) joins the loop."""
        if isinstance(rule, engines.Conversion):
            self.converts = _together(self.converts, work)
        else:
            self.work = _together(self.work, work)
            self.computes |= work.compute_s > 0
        self.memory += memory

    def close(self, chip: Chip) -> Breakdown:
        # a conversion rides along in its neighbour's read or write, unless it is all the loop does
        return _in_graph(chip, self.work if self.computes else self.converts, self.memory)


def graph(chip: Chip, ops: list[GraphOp], outputs: set, descriptor_bytes: dict | None = None,
          stored: dict | None = None) -> Breakdown:
    """A compiled graph: one launch; `outputs` are the keys of tensors that must reach HBM (results,
    activations saved for the backward, gradients). The compiler tiles the graph along its rows, so an
    intermediate stays on chip however large: only graph inputs (read once) and outputs cross HBM, and
    a data-movement op reads no more than it writes (an embedding reads the rows it gathers).
    Consecutive element-wise ops are one fused loop (_Loop); a matmul or attention op is a unit of
    its own. A CPU-fallback op splits the graph: it pays the host link for its operands, and the rest
    of the graph one more launch. `descriptor_bytes` names graph inputs whose layout only allows DMA
    descriptors that small (key -> bytes; a KV cache), `stored` those kept narrower in HBM than the
    graph computes with (key -> stored dtype; weight-only quantized weights): read at their stored size, and
    widened (widening()) in the unit of the op that reads them, where the compiler pipelines the weights' DMA,
    their widening and their use tile by tile, so its engines overlap both but it does not vanish."""
    descriptor_bytes, stored = descriptor_bytes or {}, stored or {}
    total = Breakdown(launches=chip.launch_overhead_s)
    loop = _Loop()
    for op, written, read in hbm_traffic(ops, outputs, stored):
        if op.on_host:
            total += loop.close(chip)
            loop = _Loop()
            moved = sum(tensor_bytes(t) for _, t in op.inputs) + sum(tensor_bytes(t) for _, t in op.outputs)
            total.host += moved / chip.host_link_bytes_per_s
            total.launches += chip.launch_overhead_s    # the graph continues as a second piece
            continue
        memory = 0.0
        for nbytes in written:
            memory += chip.hbm_transfer_s(nbytes)
        for key, nbytes in read:
            memory += chip.hbm_transfer_s(nbytes, descriptor_bytes.get(key))
        work = op_work(chip, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs])
        read_keys = {key for key, _ in read}
        widened = OpWork()
        for key, t in op.inputs:
            if key in read_keys and key in stored:
                widened = _together(widened, widening(chip, t, stored[key]))
        if _fuses(op.name):
            loop.add(engines.rule(op.name), work, memory)
            loop.add(DEQUANTISE, widened, 0.0)
            continue
        total += loop.close(chip)
        loop = _Loop()
        total += _in_graph(chip, _together(work, widened), memory)
    return total + loop.close(chip)


def _together(a: OpWork, b: OpWork) -> OpWork:
    """Two pieces of engine work done in one unit: each engine is busy for both."""
    return OpWork({engine: a.engine_s[engine] + b.engine_s[engine] for engine in a.engine_s}, a.flops + b.flops)


def hbm_traffic(ops: list[GraphOp], outputs: set, stored: dict | None = None):
    """What each op of a compiled graph moves through HBM, the one account graph() prices and graph_bytes sums:
    (op, bytes of each result it writes, (key, bytes) of each graph input it reads). A result reaches HBM once,
    however many ops update it; a graph input is read once, by the first op that reads it; what an earlier op
    produced stays on chip; a data-movement op reads no more than it writes; `stored` as graph() says. A CPU
    fallback op moves its operands over the host link instead: nothing here."""
    stored = stored or {}
    produced, read, written = set(), set(), set()
    for op in ops:
        if op.on_host:
            yield op, [], []
            continue
        writes = []
        for key, t in op.outputs:
            if key in outputs and key not in written:
                written.add(key)
                writes.append(tensor_bytes(t))
        cap = sum(tensor_bytes(t) for _, t in op.outputs) if isinstance(engines.rule(op.name), engines.Movement) \
            else float("inf")
        reads = []
        for key, t in op.inputs:
            if key not in produced and key not in read:
                read.add(key)
                nbytes = t.numel() * stored[key].itemsize if key in stored else tensor_bytes(t)
                reads.append((key, min(nbytes, cap)))
        produced.update(key for key, _ in op.outputs)
        yield op, writes, reads


def graph_bytes(ops: list[GraphOp], outputs: set, stored: dict | None = None) -> int:
    """The HBM bytes a compiled graph moves per run (what MBU counts): its inputs read once and its results
    written once; intermediates stay on chip (hbm_traffic)."""
    return int(sum(sum(written) + sum(nbytes for _, nbytes in read)
                   for _, written, read in hbm_traffic(ops, outputs, stored)))


def eager_issues(chip: Chip, op: GraphOp) -> list[tuple[str, str, Breakdown]]:
    """What the device issues for `op` run eagerly (GraphOp.issued), each as (kind, name, price): ("op", its name)
    for its executable, or for the in-place op the device runs on its outputs (a creation op whose composite
    kernel allocates and fills); ("copy", "device_to_device") for a copy within HBM of its outputs' bytes; nothing
    for an allocation or a view. The kinds and names are those of costmodel/work.py's DeviceWork."""
    outputs = [t for _, t in op.outputs]
    if op.issued == NOTHING:
        return []
    if op.issued == COPY and not op.on_host:
        return [("copy", "device_to_device", copied(chip, _destination_bytes(op)))]
    if op.issued in (EXECUTABLE, COPY):
        return [("op", op.name, eager_op(chip, op.name, [t for _, t in op.inputs], outputs, op.on_host))]
    return [("op", op.issued, eager_op(chip, op.issued, outputs, outputs, op.on_host))]


def _destination_bytes(op: GraphOp) -> int:
    """The bytes a copy writes: its destination once it holds the source, at the destination's dtype. A copy
    broadcasts its source (copy_), so the destination holds as many elements as the larger of the two."""
    tensors = [t for _, t in op.inputs + op.outputs]
    if not op.outputs or not tensors:
        return 0
    return max(t.numel() for t in tensors) * op.outputs[0][1].element_size()


def eager_sequence(chip: Chip, ops: list[GraphOp], stored: dict | None = None) -> Breakdown:
    """The same ops run eagerly, one by one, as the device issues them (eager_issues): what compiling them saves.
    A weight kept narrow in HBM (`stored`, as graph() says) that TensorE cannot read is first widened by an
    executable of its own, which reads it at its stored size and writes it back widened (widening())."""
    stored = stored or {}
    total = Breakdown()
    seen = set()
    for op in ops:
        for key, t in op.inputs:
            if key in stored and key not in seen:
                seen.add(key)
                work = widening(chip, t, stored[key])
                if work.compute_s > 0:
                    narrow = torch.empty(t.shape, dtype=stored[key], device="meta")
                    total += launched(chip, moved_bytes([narrow], [t]), work.compute_s)
        for _, _, price in eager_issues(chip, op):
            total += price
    return total
