"""Collective results that reach a compiled graph while their transfer is still in flight.

An eager functional collective (DTensor's async redistribute, as sequence parallelism does between
blocks) returns before the transfer completes; c10d files the pending work under the result tensor's
storage, and the compiled graph that consumes the result waits for it with `_c10d_functional.wait_tensor`
on its input. The host code runs on CPU aliases of the device inputs (launch.py), a storage c10d has
never seen: the wait inside the generated code finds no work, and the graph reads the buffer before
the transfer has filled it. So the launcher waits on the device tensors themselves, for exactly the
inputs the graph waits on, before it makes the aliases; the graph's own wait then finds nothing left.
"""
import torch

WAIT = torch.ops._c10d_functional.wait_tensor.default


def waited_inputs(gm: torch.fx.GraphModule) -> tuple[int, ...]:
    """Positions of the graph inputs that a wait_tensor in the graph waits on (directly or through views)."""
    position = {node: i for i, node in enumerate(gm.graph.find_nodes(op="placeholder"))}
    waited = {position.get(_base(node.args[0])) for node in gm.graph.find_nodes(op="call_function", target=WAIT)}
    return tuple(sorted(waited - {None}))


def _base(node: torch.fx.Node) -> torch.fx.Node:
    """The node whose storage `node` shares, following view ops back (c10d files works by storage)."""
    while node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload) and node.target.is_view:
        node = node.args[0]
    return node


def wait_for(device_args: list, waited: tuple[int, ...]) -> None:
    for i in waited:
        WAIT(device_args[i])
