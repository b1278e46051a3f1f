"""Tensor parallelism for a traced module that is not localneuron's own builder: a plan in transformers'
convention (`model._tp_plan`: module-name pattern -> style, '*' matching one name component) says which
modules are column- and row-parallel; hooks record the collectives a Megatron-style run issues there.

How the shard itself is made depends on where the model comes from: a transformers model is built from
a per-rank config (hf.py); a --model-fn model has its planned Linear layers cut by `shard_linears`.
"""
import re

import torch
from torch import nn

from localneuron.estimate import trace
from localneuron.estimate.collective_markers import enter_parallel_region, leave_parallel_region


class PlanError(ValueError):
    """The tensor-parallel plan names a style or a module the estimate cannot apply."""


# style -> (all-reduce the input's gradient in the backward, collective on the output in the forward)
STYLES = {
    "colwise": (True, None),
    "packed_colwise": (True, None),
    "local_colwise": (True, None),
    "rowwise": (False, "all_reduce"),
    "local_rowwise": (False, "all_reduce"),
    "packed_rowwise": (False, "all_reduce"),             # row-parallel over a fused (packed) projection
    "embedding_rowwise": (False, "all_reduce"),          # vocabulary-parallel embedding: partial rows summed
    "colwise_gather_output": (True, "all_gather"),       # the output's shards gathered on every rank
    "moe_tp_experts": (True, "all_reduce"),              # each rank's experts hold a slice of every expert's MLP
    "replicated_with_grad_allreduce": (False, None),     # replicated norms; their tiny gradient sync is not modelled
}


def _pattern(name: str) -> re.Pattern:
    return re.compile("^" + re.escape(name).replace(r"\*", r"[^.]+") + "$")


def planned_modules(model: nn.Module, plan: dict) -> list[tuple[str, nn.Module, str]]:
    """(name, module, style) for every module a plan entry names; entries naming parameters are shards of
    a module another entry covers (transformers' MoE plans) and are skipped."""
    for style in plan.values():
        if style not in STYLES:
            raise PlanError(f"tensor-parallel style {style!r} is not one the estimate applies; known: {sorted(STYLES)}")
    patterns = [(_pattern(name), style) for name, style in plan.items()]
    found = []
    for name, module in model.named_modules():
        for pattern, style in patterns:
            if name and pattern.match(name):
                found.append((name, module, style))
                break
    return found


class _GatherLastDim(torch.autograd.Function):
    """All-gather of the last dimension (a column-parallel output made whole): the backward keeps the
    local slice, no communication."""
    @staticmethod
    def forward(ctx, x, parts):
        ctx.local = x.shape[-1]
        full = x.new_empty((*x.shape[:-1], x.shape[-1] * parts))
        trace.record_collective("all_gather", full.numel() * full.element_size())
        return full

    @staticmethod
    def backward(ctx, grad):
        return grad.new_empty((*grad.shape[:-1], ctx.local)), None


def _first_tensor(value):
    return value if isinstance(value, torch.Tensor) else value[0]


def add_collectives(model: nn.Module, plan: dict, tp: int) -> list:
    """Hooks that record each planned module's collectives; returns their handles. An input feeding
    several column-parallel modules (q, k and v) has its gradient all-reduced once, summed first."""
    if tp == 1:
        return []
    entered: dict[int, tuple] = {}

    def before(module, args):
        x = args[0]
        if not isinstance(x, torch.Tensor) or not x.requires_grad:
            return None
        if id(x) not in entered:
            entered[id(x)] = (x, enter_parallel_region(x, tp, False))   # keeps x alive so its id stays its own
        return (entered[id(x)][1], *args[1:])

    def after(kind):
        def hook(module, args, output):
            first = _first_tensor(output)
            made = leave_parallel_region(first, tp, False) if kind == "all_reduce" else _GatherLastDim.apply(first, tp)
            return made if isinstance(output, torch.Tensor) else (made, *output[1:])
        return hook

    handles = []
    for _, module, style in planned_modules(model, plan):
        gradient, forward = STYLES[style]
        if gradient:
            handles.append(module.register_forward_pre_hook(before))
        if forward:
            handles.append(module.register_forward_hook(after(forward)))
    return handles


def shard_linears(model: nn.Module, plan: dict, tp: int) -> None:
    """Cuts each planned nn.Linear to one rank's shard: column-parallel keeps 1/tp of the output
    features, row-parallel 1/tp of the input features (rounded up). The model's own code must take its
    head counts from tensor shapes (view(..., -1, head_dim)), as a model written for TP does."""
    if tp == 1:
        return
    for name, module, style in planned_modules(model, plan):
        gradient, forward = STYLES[style]
        if forward is None and not gradient:
            continue
        if not isinstance(module, nn.Linear):
            raise PlanError(f"tp_plan entry {name!r} ({style}) is a {type(module).__name__}; with --model-fn the "
                            f"estimate shards nn.Linear layers only")
        column = forward != "all_reduce"
        out_features, in_features = module.weight.shape
        shape = (-(-out_features // tp), in_features) if column else (out_features, -(-in_features // tp))
        weight = module.weight
        module.weight = nn.Parameter(weight.new_empty(shape), requires_grad=weight.requires_grad)
        module.out_features, module.in_features = shape
        if module.bias is not None and column:
            module.bias = nn.Parameter(module.bias.new_empty(shape[0]), requires_grad=module.bias.requires_grad)


def declared_plan(model: nn.Module) -> dict:
    """The plan a module declares: `tp_plan` (this project's name) or transformers' `_tp_plan`."""
    plan = getattr(model, "tp_plan", None) or getattr(model, "_tp_plan", None)
    if plan is None:
        return {}
    if not isinstance(plan, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in plan.items()):
        raise PlanError("a model's tp_plan must be a dict of module-name pattern -> style string")
    return dict(plan)

