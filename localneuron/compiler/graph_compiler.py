"""AOTAutograd's forward, backward and inference compilers: one ATen graph over neuron tensors in, one
boxed callable out, with its metrics recorded.

A graph without ops that must run eagerly is compiled whole. Otherwise it is split (partition.py):
compiled pieces and eager ops run in graph order, and under fullgraph=True the split is an error.
"""
import contextlib
import datetime
import time
from dataclasses import dataclass

import torch
from torch._functorch._aot_autograd.logging_utils import get_aot_graph_name
from torch._guards import TracingContext

from localneuron.compiler import device_time, metrics, partition, progress
from localneuron.compiler.errors import fullgraph_eager_op
from localneuron.compiler.host_compile import DISABLED, HIT, MISS, compile_host
from localneuron.compiler.settings import CompileSettings


@dataclass
class DynamoGraph:
    """What the fw/bw compilers need to know about the Dynamo graph they belong to."""
    settings: CompileSettings
    name: str               # "<model_name>_<n>"
    frame: str
    compile_id: str
    fullgraph: bool
    recompiles: int
    recompile_reason: str | None


def compiler_for(graph: DynamoGraph, kind: str):
    def compile_graph(gm: torch.fx.GraphModule, example_inputs):
        start, began = time.perf_counter(), datetime.datetime.now()
        aot_name = get_aot_graph_name()  # "model__<aot id>_<kind>_<nth>": TorchNeuron names the graph after it
        eager = {n: e for n in gm.graph.nodes if (e := partition.eager_op(n)) is not None}
        fallbacks = [e for e in eager.values() if e.fallback]
        if fallbacks and graph.fullgraph:
            raise fullgraph_eager_op(fallbacks[0].op, fallbacks[0].why)
        analysed = time.perf_counter()
        with progress.compiling(f"{graph.name}_{kind}"):
            if eager:
                eager_nodes = partition.with_unpacking(set(eager))
                run, executables = _compile_pieces(gm, kind == "backward", graph.settings, eager_nodes)
            else:
                executable = compile_host(gm, example_inputs, kind == "backward", graph.settings)
                run, executables = executable.run, [executable]
        statuses = [executable.cache for executable in executables]
        name = f"{graph.name}_{kind}"
        # a call costs its compiled pieces' launches, as they were priced (its eager ops are priced as eager ops)
        run = device_time.register(name, run, sum(executable.work.seconds for executable in executables))
        metrics.record_graph(metrics.NeuronCompilationMetrics(
            graph=name, model_name=graph.settings.model_name, frame=graph.frame,
            compile_id=graph.compile_id, kind=kind,
            node_count=sum(n.op == "call_function" for n in gm.graph.nodes),
            compile_time_s=time.perf_counter() - start, cache=_overall(statuses),
            cache_hits=statuses.count(HIT), cache_misses=statuses.count(MISS), pieces=len(statuses),
            eager_ops=sorted({e.op for e in eager.values()}),
            recompile=graph.recompile_reason is not None, recompiles=graph.recompiles,
            recompile_reason=graph.recompile_reason,
            graph_id="+".join(executable.key for executable in executables),
            graph_name=f"{graph.settings.model_name}_{aot_name.split('__', 1)[-1]}",
            has_collectives=metrics.has_collectives(gm), graph_node_count=len(gm.graph.nodes),
            timestamp=began.strftime("%Y%m%d_%H%M%S_%f"),
            torch_neuronx_fx_passes_us=round((analysed - start) * 1e6),
            torch_neuronx_compile_us=round((time.perf_counter() - analysed) * 1e6)))
        return run

    return compile_graph


def _overall(statuses: list[str]) -> str:
    """The graph's cache result: any piece generated means code was generated ("none": nothing compiled)."""
    return next((status for status in (MISS, DISABLED, HIT) if status in statuses), "none")


@contextlib.contextmanager
def _pieces_report_no_strides():
    """Each piece would report its output strides to AOTAutograd as if it were the whole graph. The
    report stays empty instead ("no information"): the pieces keep the FX graph's output strides
    (Inductor's keep_output_stride), which is what AOTAutograd assumes without a report."""
    context = TracingContext.try_get()
    reported = context.output_strides if context is not None else None
    if reported is not None:
        context.output_strides = None
    try:
        yield
    finally:
        if reported is not None:
            context.output_strides = reported


def _compile_pieces(gm, is_backward: bool, settings: CompileSettings, eager: set):
    pieces = partition.split(gm, eager)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    (outputs,) = [n.args[0] for n in gm.graph.nodes if n.op == "output"]
    steps, executables = [], []
    with _pieces_report_no_strides():
        for piece in pieces:
            if piece.eager:
                steps.append((piece, None))
                continue
            module = partition.piece_module(gm, piece)
            executable = compile_host(module, [n.meta["val"] for n in piece.inputs], is_backward, settings)
            steps.append((piece, executable.run))
            executables.append(executable)

    def run(args: list) -> list:
        values = dict(zip(placeholders, args))
        args.clear()
        for piece, compiled in steps:
            if compiled is None:
                (node,) = piece.nodes
                values[node] = partition.run_eager(gm, node, values)
            else:
                for node, value in zip(piece.outputs, compiled([values[n] for n in piece.inputs])):
                    values[node] = value
        return [values[o] if isinstance(o, torch.fx.Node) else o for o in outputs]

    run._boxed_call = True
    return run, executables
