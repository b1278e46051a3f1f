"""torch.compile(backend="neuron"): Dynamo graph in, device executable out (docs/support-matrix.md#torchcompile).

Dynamo captures the graph; AOTAutograd, with Inductor's decompositions, splits it into forward and
backward ATen graphs over neuron FakeTensors; graph_compiler.py turns each into host code that runs
on the device's memory. Device placement must stay on neuron tensors up to that point, so autograd
builds its graph on device tensors (aliasing at the Dynamo level would build it on host aliases).
"""
import warnings

import torch
from torch._dynamo.backends.common import aot_autograd
from torch._functorch import config as functorch_config
from torch._guards import CompileContext
from torch._inductor.decomposition import select_decomp_table

from localneuron.compiler import errors, metrics, placement, progress
from localneuron.ops import tracking
from localneuron.compiler.graph_compiler import DynamoGraph, compiler_for
from localneuron.compiler.inductor import random_ops_as_eager
from localneuron.compiler.settings import resolve
from localneuron.runtime import call_sites

# Static shapes, as on TorchNeuron: a new input shape must recompile a static graph. Dynamo decides
# whether to make a changed dimension dynamic ("automatic dynamic shapes") before any backend sees
# the graph, and torch.compile gives a backend named by a string no hook to scope the flag, so it is
# switched off process-wide once this backend is loaded (dynamic=False sets the same for its calls).
torch._dynamo.config.automatic_dynamic_shapes = False

_graph_count = 0


def _current_frame() -> tuple[str, bool]:
    """(name of the code Dynamo is compiling, whether it was asked for fullgraph=True)."""
    from torch._dynamo import external_utils
    from torch._dynamo.symbolic_convert import InstructionTranslator

    tx = InstructionTranslator.current_tx()
    code = tx.f_code
    fullgraph = bool(tx.one_graph or tx.error_on_graph_break)
    # Compiling a module goes through a wrapper frame of Dynamo's; name the module instead.
    fn = tx.f_locals.get("fn") if code.co_filename == external_utils.__file__ else None
    owner = fn if isinstance(fn, torch.nn.Module) else getattr(fn, "__self__", None)
    if isinstance(owner, torch.nn.Module):
        return f"{type(owner).__name__}.forward", fullgraph
    return f"{code.co_name} ({code.co_filename}:{code.co_firstlineno})", fullgraph


def _reject_dynamic(example_inputs) -> None:
    if not torch._dynamo.config.assume_static_by_default:
        raise errors.dynamic_shapes("torch.compile was called with dynamic=True")
    for i, x in enumerate(example_inputs):
        if isinstance(x, torch.SymInt) or (isinstance(x, torch.Tensor) and any(
                isinstance(s, torch.SymInt) for s in (*x.shape, *x.stride()))):
            raise errors.dynamic_shapes(f"graph input {i} has a symbolic shape, e.g. from torch._dynamo.mark_dynamic")


def neuron_backend(gm: torch.fx.GraphModule, example_inputs, mode: str | None = None, options: dict | None = None):
    global _graph_count
    settings = resolve(mode, options)
    _reject_dynamic(example_inputs)
    frame, fullgraph = _current_frame()
    compile_id = CompileContext.current_compile_id()
    recompiles, reason = metrics.record_frame(compile_id.frame_id, frame, str(compile_id), example_inputs)
    if recompiles:
        call_sites.record(call_sites.RECOMPILE, frame)
        tracking.warn_once(f"recompile:{frame}:{reason}", f"{frame} recompiles (graph {recompiles + 1} of this frame) "
                           f"for a new input shape: {reason}. Static shapes compile one graph per shape: pad inputs "
                           "to a few bucket lengths to bound the recompiles.")
    graph = DynamoGraph(settings=settings, name=f"{settings.model_name}_{_graph_count}", frame=frame,
                        compile_id=str(compile_id), fullgraph=fullgraph, recompiles=recompiles, recompile_reason=reason)
    _graph_count += 1
    gm, example_inputs, wrap = placement.on_device(gm, example_inputs, settings)
    try:
        # No donated buffers: AOTAutograd saves an extern kernel's output twice (as itself and detached, e.g. fused
        # attention's output for its own backward and for the op after it) and lets Inductor reuse one of them in
        # place in the backward, overwriting what the other still holds (sdpa(...).cos() got wrong gradients).
        with progress.frame(frame, graph.name, recompiles, reason), functorch_config.patch(donated_buffer=False), \
                random_ops_as_eager():
            compiled = aot_autograd(
                fw_compiler=compiler_for(graph, "forward"), bw_compiler=compiler_for(graph, "backward"),
                inference_compiler=compiler_for(graph, "inference"), decompositions=select_decomp_table(),
                keep_inference_input_mutations=True)(gm, example_inputs)
    except errors.NeuronCompileError:
        raise
    except Exception as error:
        metrics.record_failure(frame, error, settings.fallback_execution)
        if not settings.fallback_execution:
            raise
        warnings.warn(f"[Neuron] [WARNING] Compiling {frame} for neuron failed ({type(error).__name__}: {error}). "
                      "Falling back to original GraphModule execution.", UserWarning, stacklevel=2)
        compiled = gm.forward
    return wrap(compiled)
