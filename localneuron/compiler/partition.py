"""Splits an ATen graph where it holds ops that must not be compiled for the NeuronCore.

An op that runs as a CPU fallback in eager (support table rule "cpu_fallback") runs eagerly here
too, on device tensors, so it is executed, tracked and warned about exactly as in eager; the code
between such ops is compiled piece by piece.
"""
import operator
from dataclasses import dataclass, field

import torch
from torch._higher_order_ops.auto_functionalize import auto_functionalized_v2_dense
from torch.fx.node import map_arg

from localneuron.ops import support
from localneuron.ops.op_records import CPU_FALLBACK

# op namespace -> why its ops run eagerly on the device rather than inside host-compiled code
EAGER_NAMESPACES = {
    "localneuron_nki": "NKI kernels run on the simulated NeuronCore through the NKI simulator",
}

# higher-order op -> why it runs eagerly on the device (its eager implementation differentiates; the host
# code generator cannot compile it)
EAGER_HIGHER_ORDER_OPS = {
    "flex_attention": "Inductor's host code generator lowers flex attention for inference only",
    "flex_attention_backward": "Inductor's host code generator has no flex attention backward",
}


# higher-order ops that wrap a mutating op during functionalization (its `_mutable_op`): the wrapped op decides
FUNCTIONALIZING_WRAPPERS = ("auto_functionalized", "auto_functionalized_v2")

DEVICE_ONLY = ("its only backend kernel is the device's (PrivateUse1): host code, which runs on host aliases, "
               "cannot call it")


def _device_only(op: torch._ops.OpOverload) -> bool:
    """An op another library registered for the device alone (e.g. a serving engine's attention op)."""
    name = op.name()
    has = torch._C._dispatch_has_kernel_for_dispatch_key
    return has(name, "PrivateUse1") and not any(
        has(name, key) for key in ("CPU", "CompositeExplicitAutograd", "CompositeImplicitAutograd"))


def _dtypes(node: torch.fx.Node) -> set[str]:
    dtypes = set()
    for arg in node.all_input_nodes:
        val = arg.meta.get("val")
        if isinstance(val, torch.Tensor):
            dtypes.add(str(val.dtype).removeprefix("torch."))
    return dtypes


@dataclass(frozen=True)
class EagerOp:
    op: str          # "aten::linalg_inv_ex"
    why: str
    fallback: bool   # a CPU fallback (a graph break under fullgraph=True) rather than a device kernel


def eager_op(node: torch.fx.Node) -> EagerOp | None:
    """How `node` runs eagerly, or None when it can be compiled."""
    target = node.target
    if node.op != "call_function":
        return None
    if isinstance(target, torch._ops.HigherOrderOperator):
        if target.name() in FUNCTIONALIZING_WRAPPERS:
            wrapped = node.kwargs.get("_mutable_op", node.args[0] if node.args else None)
            if isinstance(wrapped, torch._ops.OpOverload) and _device_only(wrapped):
                return EagerOp(wrapped._schema.name, DEVICE_ONLY, fallback=False)
            return None
        why = EAGER_HIGHER_ORDER_OPS.get(target.name())
        return EagerOp(f"higher_order::{target.name()}", why, fallback=False) if why else None
    if not isinstance(target, torch._ops.OpOverload):
        return None
    name = target._schema.name
    if _device_only(target):
        return EagerOp(name, DEVICE_ONLY, fallback=False)
    if target.namespace in EAGER_NAMESPACES:
        return EagerOp(name, EAGER_NAMESPACES[target.namespace], fallback=False)
    rule, _ = support.rule_for(name, _dtypes(node))
    if rule == CPU_FALLBACK:
        return EagerOp(name, f"{name} runs as a CPU fallback on Neuron", fallback=True)
    return None


def with_unpacking(eager: set) -> set:
    """The eager nodes plus the getitem nodes that unpack their tuple results (those run eagerly too,
    so no compiled piece receives a tuple)."""
    return eager | {user for node in eager for user in node.users if user.target is operator.getitem}


@dataclass
class Piece:
    eager: bool
    nodes: list = field(default_factory=list)
    inputs: list = field(default_factory=list)   # nodes defined before this piece that it reads
    outputs: list = field(default_factory=list)  # nodes of this piece read after it


def split(gm: torch.fx.GraphModule, eager: set) -> list[Piece]:
    """Consecutive runs of compiled or eager nodes, with the values that cross piece boundaries."""
    pieces: list[Piece] = []
    owner = {}
    for node in gm.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        is_eager = node in eager
        if not pieces or pieces[-1].eager != is_eager or is_eager:
            pieces.append(Piece(eager=is_eager))
        pieces[-1].nodes.append(node)
        owner[node] = pieces[-1]
    for piece in pieces:
        for node in piece.nodes:
            for arg in node.all_input_nodes:
                if owner.get(arg) is not piece and arg.op != "get_attr" and arg not in piece.inputs:
                    piece.inputs.append(arg)
            if any(owner.get(user) is not piece for user in node.users):
                piece.outputs.append(node)
    return pieces


def piece_module(gm: torch.fx.GraphModule, piece: Piece) -> torch.fx.GraphModule:
    """A graph module computing piece.outputs (always as a tuple) from piece.inputs."""
    graph = torch.fx.Graph()
    env = {}
    for node in piece.inputs:
        env[node] = graph.placeholder(node.name)
        env[node].meta = dict(node.meta)

    def lookup(node):
        if node not in env and node.op == "get_attr":
            env[node] = graph.get_attr(node.target)
            env[node].meta = dict(node.meta)
        return env[node]

    for node in piece.nodes:
        env[node] = graph.node_copy(node, lookup)
    graph.output(tuple(env[n] for n in piece.outputs))
    return torch.fx.GraphModule(gm, graph)


# ops whose result is a new buffer that aliases nothing: a functionalized op that writes into one, and is its
# only reader, may write in place instead of into a copy (what Inductor's reinplacing does for compiled code)
FRESH_BUFFERS = {
    torch.ops.aten.empty.memory_format,
    torch.ops.aten.empty_strided.default,
    torch.ops.aten.zeros.default,
    torch.ops.aten.full.default,
}


def _bases_to_clone(node: torch.fx.Node) -> tuple[int, ...]:
    """The bases an auto_functionalized_v2 node must copy before its op writes them: all but fresh buffers
    that nothing else reads."""
    asked = node.kwargs.get("_only_clone_these_bases")
    bases = node.kwargs["_all_bases"]
    indices = range(len(bases)) if asked is None else asked
    return tuple(i for i in indices if not (bases[i].target in FRESH_BUFFERS and len(bases[i].users) == 1))


def run_eager(gm: torch.fx.GraphModule, node: torch.fx.Node, values: dict):
    def value(arg):
        return getattr(gm, arg.target) if arg.op == "get_attr" else values[arg]

    args = map_arg(node.args, value)
    kwargs = map_arg(node.kwargs, value)
    if node.target is torch.ops.higher_order.auto_functionalized_v2:
        # its dense kernel directly: the operator's own entry re-checks the schema and goes through the
        # Python dispatcher on every call, which costs more than a small device-only op itself (AOTAutograd
        # runs the forward without autograd and without functionalization, so no other key would run)
        return auto_functionalized_v2_dense(*args, **{**kwargs, "_only_clone_these_bases": _bases_to_clone(node)})
    return node.target(*args, **kwargs)
