"""Walking an op's arguments: the tensors in them, and the schema facts the policy needs.

Schema facts are cached per schema: the Python routes ask them on every call."""
import functools
import re

import torch
from torch.utils._pytree import tree_flatten, tree_map

from localneuron.ops.op_records import UNMARKED_WRITES

SIXTY_FOUR_BIT = (torch.float64, torch.int64)


def per_schema(compute):
    """compute(schema), cached. Keyed by identity: a FunctionSchema's hash fails on list defaults (`int[2]
    stride=[]`), and an op's schema object lives as long as the op. Each entry holds its schema, so the id
    cannot be reused by another object."""
    cache: dict[int, tuple] = {}

    @functools.wraps(compute)
    def cached(schema):
        entry = cache.get(id(schema))
        if entry is None:
            entry = cache[id(schema)] = (schema, compute(schema))
        return entry[1]
    return cached


def neuron_tensors(args, kwargs, device_type: str = "neuron") -> list[torch.Tensor]:
    """The device's tensors among the arguments (`localneuron estimate` traces on "meta" tensors)."""
    flat, _ = tree_flatten((args, kwargs))
    return [x for x in flat if isinstance(x, torch.Tensor) and x.device.type == device_type]


def dtypes_of(args, kwargs, device_type: str = "neuron") -> set[str]:
    return {str(t.dtype).removeprefix("torch.") for t in neuron_tensors(args, kwargs, device_type)}


def returns_view(schema) -> bool:
    return any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns)


# "Tensor(a!) self", "Tensor(a!)? running_mean", "Tensor(b!)[] grads": the schema's text is the only place
# that says an optional argument is written (its Argument.alias_info is None)
_WRITTEN_ARGUMENT = re.compile(r"Tensor\(\w+!\)(?:\?|\[\])*\s+(\w+)")


@per_schema
def mutated_argument_names(schema) -> tuple[str, ...]:
    arguments_text = str(schema).split("->")[0]
    marked = _WRITTEN_ARGUMENT.findall(arguments_text)
    # custom ops' schemas print their alias sets as `Tensor($0! -> )`, which the text pattern misses
    marked += [a.name for a in schema.arguments
               if a.alias_info is not None and a.alias_info.is_write and a.name not in marked]
    return tuple(marked + UNMARKED_WRITES.get(schema.name, []))


@per_schema
def generator_argument_names(schema) -> tuple[str, ...]:
    return tuple(a.name for a in schema.arguments if "Generator" in str(a.type))


@per_schema
def positions(schema) -> dict[str, int]:
    """Positional argument name -> its index in the call's args."""
    return {a.name: i for i, a in enumerate(a for a in schema.arguments if not a.kwarg_only)}


def bind(schema, args, kwargs) -> dict:
    """Argument name -> value, for the positional and keyword arguments an op was called with."""
    bound = dict(kwargs)
    bound.update(zip(positions(schema), args))
    return bound


def written_arguments(schema, call: tuple, replaced: tuple) -> list[tuple]:
    """(value in `call`, value in `replaced`) for each argument the op writes; `call` and `replaced` are
    (args, kwargs) of the same call, as issued and as handed to the kernel that ran it."""
    mutated = mutated_argument_names(schema)
    if not mutated:
        return []
    originals, replacements = bind(schema, *call), bind(schema, *replaced)
    return [(originals[name], replacements[name]) for name in mutated]


def map_values(fn, value):
    """`value` with fn applied to each of its leaves: an op's arguments and results are values (tensors, None,
    numbers, devices...) or lists and tuples of them. Lists stay lists, every tuple becomes a plain tuple."""
    if isinstance(value, list):
        return [map_values(fn, x) for x in value]
    if isinstance(value, tuple):
        return tuple(map_values(fn, x) for x in value)
    return fn(value)


def map_arguments(fn, args, kwargs) -> tuple[list, dict]:
    """(args, kwargs) with fn applied to each leaf, in argument order (positional, then keyword)."""
    return [map_values(fn, x) for x in args], {name: map_values(fn, x) for name, x in kwargs.items()}


def map_tensors(fn, result):
    return map_values(lambda x: fn(x) if isinstance(x, torch.Tensor) else x, result)


def uses_float64(args, kwargs) -> bool:
    return uses_64bit(args, kwargs, ignore_int64=True)


def uses_64bit(args, kwargs, ignore_int64: bool = False, device_type: str = "neuron") -> bool:
    wide = (torch.float64,) if ignore_int64 else SIXTY_FOUR_BIT
    flat, _ = tree_flatten((args, kwargs))
    return any((isinstance(x, torch.Tensor) and x.device.type == device_type and x.dtype in wide)
               or (isinstance(x, torch.dtype) and x in wide) for x in flat)


def _to_meta(x):
    if isinstance(x, torch.Tensor) and x.device.type == "neuron":
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, torch.device) and x.type == "neuron":
        return torch.device("meta")
    return x


def run_on_meta(op, args, kwargs) -> tuple[bool, object]:
    """(True, outputs) of the op's meta kernel on the arguments' shapes; (False, None) if it has none or
    its output shapes depend on the data."""
    try:
        return True, op(*tree_map(_to_meta, args), **tree_map(_to_meta, kwargs))
    except Exception:
        return False, None
