"""Priced device work: the one record of what a piece of work costs on the simulated target.

Invariant: shapes and bytes become seconds and an engine here, once, when the work is issued (an eager op at
its signature's first call, on the outputs its meta kernel gives; a copy; a collective; a compiled graph; an NKI
kernel). The DeviceWork it returns travels with the work, and every view reads it and never prices again: the
profiler's spans and tracks, the report's time by source line, the distributed statistics, MFU and MBU.

The engine is the track a profiler shows the work on: the busiest compute engine of the op; the DMA queues
for an op that only moves data (an embedding, a gather, a copy within the device); the collective cores for a
collective.
"""
from dataclasses import dataclass

import torch

from localneuron.costmodel import engines
from localneuron.costmodel.collectives import c10d_seconds
from localneuron.costmodel.hardware import Chip
from localneuron.costmodel.ops import GraphOp, copied, eager_op, graph, graph_bytes, moved_bytes

TENSOR_E, VECTOR_E, SCALAR_E, GPSIMD_E, DMA, COLLECTIVES = "TensorE", "VectorE", "ScalarE", "GpSimdE", "DMA", "Collectives"
# the engines of a NeuronCore, in the order a profiler shows their tracks
TRACKS = (TENSOR_E, VECTOR_E, SCALAR_E, GPSIMD_E, DMA, COLLECTIVES)
ENGINE_TRACKS = {"tensor": TENSOR_E, "vector": VECTOR_E, "scalar": SCALAR_E, "gpsimd": GPSIMD_E}
HOST = "host"  # a CPU fallback: host work, on no track of the device

LOW_PRECISION = (torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class DeviceWork:
    kind: str             # "op", "copy", "collective", "graph" or "nki"
    name: str             # the op as the dispatcher names it, the copy's direction, the collective, graph or kernel
    engine: str           # one of TRACKS, or HOST
    seconds: float        # per run, on the simulated target
    flops: float = 0.0    # TensorE FLOPs per run (what MFU counts)
    bytes: int = 0        # HBM bytes per run (what MBU counts)
    low_precision: bool = False  # its FLOPs are bf16/fp16 ones (MFU's peak is then the bf16 one)


def _engine(op: engines.OpWork) -> str:
    return ENGINE_TRACKS[op.busiest] if op.compute_s > 0 else DMA


def price_op(chip: Chip, name: str, inputs: list, outputs: list, on_host: bool = False) -> DeviceWork:
    """An eager op, its operands real, fake or meta tensors (only shapes and dtypes are read), at ops.eager_op's
    price: the one `localneuron estimate` sums for a forward run op by op."""
    moved = moved_bytes(inputs, outputs)
    if on_host:
        return DeviceWork("op", name, HOST, eager_op(chip, name, inputs, outputs, on_host=True).total, bytes=moved)
    work = engines.op_work(chip, name, inputs, outputs)
    return DeviceWork("op", name, _engine(work), eager_op(chip, name, inputs, outputs, work=work).total, work.flops,
                      moved, any(t.dtype in LOW_PRECISION for t in inputs))


COPY_DIRECTIONS = ("host_to_device", "device_to_host", "device_to_device")


def price_copy(chip: Chip, direction: str, nbytes: int) -> DeviceWork:
    """A copy of nbytes at ops.copied's price: over the host link, or within HBM."""
    if direction not in COPY_DIRECTIONS:
        raise ValueError(f"a copy goes one of {COPY_DIRECTIONS}, not {direction!r}")
    within = direction == "device_to_device"
    seconds = copied(chip, nbytes, within).total
    return DeviceWork("copy", direction, DMA, seconds, bytes=2 * nbytes if within else 0)


def price_collective(chip: Chip, kind: str, nbytes: int, ranks: int) -> DeviceWork:
    """One c10d collective among `ranks` processes, one NeuronCore each (collectives.c10d_seconds)."""
    return DeviceWork("collective", kind, COLLECTIVES, c10d_seconds(chip, kind, nbytes, ranks), bytes=nbytes)


def price_graph(chip: Chip, name: str, ops: list[GraphOp], outputs: set) -> DeviceWork:
    """A compiled graph (ops.graph: one launch, fused loops); shown on the engine its ops keep busiest. Its bytes
    are what ops.graph charges HBM for (ops.graph_bytes): its inputs read and its results written, intermediates
    staying on chip."""
    busy = dict.fromkeys(engines.ENGINES, 0.0)
    flops = 0.0
    for op in ops:
        if op.on_host:
            continue
        work = engines.op_work(chip, op.name, [t for _, t in op.inputs], [t for _, t in op.outputs])
        flops += work.flops
        for engine, seconds in work.engine_s.items():
            busy[engine] += seconds
    busiest = max(busy, key=busy.get)
    return DeviceWork("graph", name, ENGINE_TRACKS[busiest] if busy[busiest] > 0 else DMA,
                      graph(chip, ops, outputs).total, flops, graph_bytes(ops, outputs))


def price_kernel(name: str, latency_ns: float, engine_busy_ns: dict) -> DeviceWork:
    """An NKI kernel as its cycle model timed it (engine_busy_ns: engine -> busy ns, "tensor", "dma"...)."""
    busiest = max(engine_busy_ns, key=engine_busy_ns.get, default=None)
    busy = busiest is not None and engine_busy_ns[busiest] > 0
    return DeviceWork("nki", name, ENGINE_TRACKS.get(busiest, DMA) if busy else DMA, latency_ns * 1e-9)
