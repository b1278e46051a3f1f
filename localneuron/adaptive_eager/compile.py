"""A run of queued ops as one executable, from the compile path of torch.compile(backend="neuron").

csrc/fusion/fusion.cpp describes a run it has seen twice: its ops in order, each argument wired to an input of
the run, to a result of an earlier op of the run, or to a constant; the inputs (host aliases of the
device tensors); which results the run must produce (the others nobody refers to any more). Here the
run becomes an FX graph, compiled by the same host code generator and compile cache as a compiled
graph (compiler/host_compile.py), with lower-precision intermediates rounded after every op as ATen
rounds them. The executable takes the inputs and returns the results; the C++ side writes them into
the tensors Python already holds.
"""
import math
import operator

import torch
from torch._inductor import config as inductor_config
from torch._inductor.decomposition import select_decomp_table
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.passes.fake_tensor_prop import FakeTensorProp
from torch.fx.experimental.proxy_tensor import make_fx

from localneuron.adaptive_eager import native, report, stats  # noqa: F401  (report: registers its section)
from localneuron.adaptive_eager.fusible_ops import ONLY_WITH
from localneuron.compiler import device_time
from localneuron.compiler.host_compile import compile_host
from localneuron.compiler.settings import CompileSettings, cache_settings
from localneuron.runtime.environment import read

MODEL_NAME = "adaptive_eager"


def _overload(name: str, overload: str) -> torch._ops.OpOverload:
    namespace, op = name.split("::")
    return getattr(getattr(getattr(torch.ops, namespace), op), overload or "default")


def build_graph(description: dict) -> torch.fx.GraphModule:
    graph = torch.fx.Graph()
    inputs = [graph.placeholder(f"input{k}") for k in range(len(description["inputs"]))]
    results = []  # per op: its result nodes
    for name, overload, arguments in description["ops"]:
        op = _overload(name, overload)
        args, kwargs = [], {}
        for spec, (kind, *where) in zip(op._schema.arguments, arguments):
            if kind == "input":
                value = inputs[where[0]]
            elif kind == "result":
                value = results[where[0]][where[1]]
            else:
                value = where[0]
            if spec.kwarg_only:
                kwargs[spec.name] = value
            else:
                args.append(value)
        node = graph.call_function(op, tuple(args), kwargs)
        count = len(op._schema.returns)
        results.append([node] if count == 1 else [graph.call_function(operator.getitem, (node, j))
                                                   for j in range(count)])
    graph.output([results[item][output] for item, output in description["outputs"]])
    return torch.fx.GraphModule(torch.nn.Module(), graph)


def _clamp_as_aten(x, min=None, max=None):
    """clamp as ATen's kernel computes it: an element equal to a bound is kept (clamp(-0.0, min=0.0) is
    -0.0; the code generator's maximum would answer 0.0), NaN stays NaN, min > max gives max, and a NaN bound
    makes every element NaN."""
    if any(isinstance(bound, float) and math.isnan(bound) for bound in (min, max)):
        return torch.full_like(x, math.nan, dtype=torch.result_type(x, math.nan))
    result = x
    if min is not None:
        result = torch.where(result < min, min, result)
    if max is not None:
        result = torch.where(result > max, max, result)
    return result


# Decompositions that keep ATen's bits where the code generator's own lowering would not.
EXACT_DECOMPOSITIONS = {torch.ops.aten.clamp.default: _clamp_as_aten}


def _settings() -> CompileSettings:
    return CompileSettings(model_name=MODEL_NAME, fallback_execution=False, cpu_autocopy=False, retain_device=False,
                           debug_dir=read("TORCH_NEURONX_DEBUG_DIR"),
                           preserve_artifacts=read("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS"),
                           cache=cache_settings())


def reproducible(description: dict) -> bool:
    """Whether every call passes the values fusible_ops.ONLY_WITH requires."""
    for name, overload, arguments in description["ops"]:
        required = ONLY_WITH.get(f"{name}.{overload}" if overload else name)
        if required is None:
            continue
        op = _overload(name, overload)
        for spec, (kind, *where) in zip(op._schema.arguments, arguments):
            if spec.name == required[0] and (kind != "constant" or where[0] != required[1]):
                return False
    return True


def issued_dtypes_hold(description: dict, fake_mode: FakeTensorMode, fake_inputs: list) -> bool:
    """Whether tracing now gives every op the result dtypes it had when issued: type promotion reads the
    default dtype, which the program may have changed since (the run's key holds the dtypes it was issued with)."""
    graph = build_graph(description)
    FakeTensorProp(graph, fake_mode).propagate(*fake_inputs)
    calls = [node for node in graph.graph.nodes if node.op == "call_function" and node.target is not operator.getitem]
    for node, issued in zip(calls, description["result_dtypes"]):
        value = node.meta["val"]
        results = value if isinstance(value, (tuple, list)) else (value,)
        if [r.dtype for r in results] != list(issued):
            return False
    return True


def compile_run(description: dict):
    """For the described run (csrc/fusion/fusion.cpp calls this on the thread that runs it): its C++ program
    (_C.FusedKernels), or run(inputs) -> results where the wrapper is not readable as one, or None when
    the run cannot be fused with the same bits (or the default dtype changed since it was issued)."""
    if not reproducible(description):
        return None
    fake_mode = FakeTensorMode()
    example_inputs = [fake_mode.from_tensor(t) for t in description["inputs"]]
    if not issued_dtypes_hold(description, fake_mode, example_inputs):
        return None
    # The setting acts twice: tracing marks each op with 16-bit float operands or results (the mark is
    # what makes the code generator round there), then the code generator rounds where marked.
    with inductor_config.patch(emulate_precision_casts=True):
        # Decomposed as AOTAutograd decomposes a compiled graph: the code generator lowers only those ops.
        with fake_mode:
            decompositions = {**select_decomp_table(), **EXACT_DECOMPOSITIONS}
            gm = make_fx(build_graph(description), decomposition_table=decompositions)(*example_inputs)
        executable = compile_host(gm, example_inputs, False, _settings())
    record = stats.new_executable(executable.work, device_time.graph_ops(gm)[0], description["lines"],
                                  [name for name, _, _ in description["ops"]])
    launch = executable.run

    def run(inputs: list) -> list:  # also what the C++ program runs while a trace records (the trace's event)
        record.calls += 1
        return launch(list(inputs))

    try:
        record.program = native.read_program(executable.compiled, description["inputs"], run)
    except native.NotReadable:
        return run
    return record.program
