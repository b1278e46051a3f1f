"""Time of eager ops and of compiled graphs on one logical NeuronCore.

Eager: every op is its own executable (one launch), reads its inputs from HBM and writes its outputs
back. Compiled: a graph is one launch; only its inputs, its outputs and the intermediates too large to
stay in SBUF cross HBM (assumptions.py). A CPU fallback pays two launches and the host link both ways.
"""
from dataclasses import dataclass

from localneuron.costmodel import tiles
from localneuron.costmodel.assumptions import SBUF_SHARE_FOR_INTERMEDIATES
from localneuron.costmodel.engines import op_work, tensor_bytes
from localneuron.costmodel.hardware import Chip
from localneuron.costmodel.time import Breakdown


def eager_op(chip: Chip, name: str, inputs: list, outputs: list, on_host: bool = False) -> Breakdown:
    moved = sum(tensor_bytes(t) for t in inputs) + sum(tensor_bytes(t) for t in outputs)
    if on_host:
        return Breakdown(launches=2 * chip.launch_overhead_s, host=moved / chip.host_link_bytes_per_s)
    compute = op_work(chip, name, inputs, outputs).compute_s
    memory = moved / chip.memory_bytes_per_s_per_core
    return Breakdown(compute=compute, memory=max(0.0, memory - compute), launches=chip.launch_overhead_s)


def eager_seconds(chip: Chip, name: str, inputs: list, outputs: list, on_host: bool = False) -> float:
    return eager_op(chip, name, inputs, outputs, on_host).total


def _sbuf_limit(chip: Chip) -> float:
    return SBUF_SHARE_FOR_INTERMEDIATES * chip.core.sbuf_bytes * chip.lnc


def _in_graph(chip: Chip, name: str, inputs: list, outputs: list, moved: int, memory: float | None = None) -> Breakdown:
    """An op inside a compiled graph that moves `moved` bytes between HBM and SBUF (in `memory` seconds
    when not all at the sustained rate): no launch of its own; its engines wait on their dependency
    latency, a transfer on the fixed DMA latency."""
    work = op_work(chip, name, inputs, outputs)
    compute = work.compute_s
    if compute > 0:
        compute += tiles.DEPENDENCY_LATENCY / (chip.core.clock_ghz[work.busiest] * 1e9)
    if memory is None:
        memory = moved / chip.memory_bytes_per_s_per_core
    if moved:
        memory = max(memory, chip.core.dma_fixed_latency_ns * 1e-9)
    return Breakdown(compute=compute, memory=max(0.0, memory - compute))


def fused_seconds(chip: Chip, name: str, inputs: list, outputs: list, on_host: bool = False) -> float:
    """The op as one node of a compiled graph whose operands are intermediates of the graph: only
    operands too large for SBUF cross HBM (what compiling the op's neighbourhood would give)."""
    if on_host:
        return eager_seconds(chip, name, inputs, outputs, on_host)
    limit = _sbuf_limit(chip)
    moved = sum(tensor_bytes(t) for t in list(inputs) + list(outputs) if tensor_bytes(t) > limit)
    return _in_graph(chip, name, inputs, outputs, moved).total


@dataclass(frozen=True)
class GraphOp:
    """One op of a graph: its name, and its operands as (tensor key, tensor) pairs; keys say which
    operands are the same tensor (a storage), so the graph knows what is produced inside it."""
    name: str
    inputs: tuple
    outputs: tuple
    on_host: bool = False


def graph(chip: Chip, ops: list[GraphOp], outputs: set, descriptor_bytes: dict | None = None) -> Breakdown:
    """A compiled graph: one launch; `outputs` are the keys of tensors that must reach HBM (results,
    activations saved for the backward, gradients). A CPU-fallback op splits the graph: it pays the
    host link for its operands, and the rest of the graph one more launch. `descriptor_bytes` names
    graph inputs whose layout only allows DMA descriptors that small (key -> bytes; a KV cache)."""
    descriptor_bytes = descriptor_bytes or {}
    sbuf_limit = _sbuf_limit(chip)
    produced = {key for op in ops for key, _ in op.outputs}
    read_once = set()
    total = Breakdown(launches=chip.launch_overhead_s)
    for op in ops:
        if op.on_host:
            moved = sum(tensor_bytes(t) for _, t in op.inputs) + sum(tensor_bytes(t) for _, t in op.outputs)
            total.host += moved / chip.host_link_bytes_per_s
            total.launches += chip.launch_overhead_s    # the graph continues as a second piece
            continue
        moved, memory = 0, 0.0
        for key, t in op.inputs:
            size = tensor_bytes(t)
            spilled = size > sbuf_limit
            if key not in produced and (key not in read_once or spilled):
                moved += size           # a graph input, read from HBM (again, if it cannot stay in SBUF)
                memory += chip.hbm_transfer_s(size, descriptor_bytes.get(key))
                read_once.add(key)
            elif key in produced and spilled:
                moved += size           # a spilled intermediate read back
                memory += chip.hbm_transfer_s(size)
        for key, t in op.outputs:
            size = tensor_bytes(t)
            if key in outputs or size > sbuf_limit:
                moved += size
                memory += chip.hbm_transfer_s(size)
        total += _in_graph(chip, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs], moved, memory)
    return total


def eager_sequence(chip: Chip, ops: list[GraphOp]) -> Breakdown:
    """The same ops launched one by one, each an executable of its own (what compiling them saves)."""
    total = Breakdown()
    for op in ops:
        total += eager_op(chip, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs], op.on_host)
    return total
