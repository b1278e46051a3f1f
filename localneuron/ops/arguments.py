"""Walking an op's arguments: the tensors in them, and the schema facts the policy needs."""
import re

import torch
from torch.utils._pytree import tree_flatten, tree_map

from localneuron.ops.op_records import UNMARKED_WRITES

SIXTY_FOUR_BIT = (torch.float64, torch.int64)


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


def mutated_argument_names(schema) -> list[str]:
    arguments_text = str(schema).split("->")[0]
    marked = _WRITTEN_ARGUMENT.findall(arguments_text)
    # custom ops' schemas print their alias sets as `Tensor($0! -> )`, which the text pattern misses
    marked += [a.name for a in schema.arguments
               if a.alias_info is not None and a.alias_info.is_write and a.name not in marked]
    return marked + UNMARKED_WRITES.get(schema.name, [])


def generator_argument_names(schema) -> list[str]:
    return [a.name for a in schema.arguments if "Generator" in str(a.type)]


def bind(schema, args, kwargs) -> dict:
    """Argument name -> value, for the positional and keyword arguments an op was called with."""
    bound = dict(kwargs)
    positional = [a for a in schema.arguments if not a.kwarg_only]
    for a, v in zip(positional, args):
        bound[a.name] = v
    return bound


def output_device(args, kwargs) -> torch.device:
    tensors = neuron_tensors(args, kwargs)
    if tensors:
        return tensors[0].device
    flat, _ = tree_flatten((args, kwargs))
    for x in flat:
        if isinstance(x, torch.device) and x.type == "neuron":
            return torch.device("neuron", x.index if x.index is not None else torch.neuron.current_device())
    return torch.device("neuron", torch.neuron.current_device())


def map_tensors(fn, tree):
    return tree_map(lambda x: fn(x) if isinstance(x, torch.Tensor) else x, tree)


def uses_float64(args, kwargs) -> bool:
    return uses_64bit(args, kwargs, ignore_int64=True)


def uses_64bit(args, kwargs, ignore_int64: bool = False, device_type: str = "neuron") -> bool:
    wide = (torch.float64,) if ignore_int64 else SIXTY_FOUR_BIT
    flat, _ = tree_flatten((args, kwargs))
    return any((isinstance(x, torch.Tensor) and x.device.type == device_type and x.dtype in wide)
               or (isinstance(x, torch.dtype) and x in wide) for x in flat)


# c10::MemoryFormat values; the executor hands enum arguments to Python as plain ints
MEMORY_FORMAT_NAMES = {0: "torch.contiguous_format", 1: "torch.preserve_format", 2: "torch.channels_last",
                       3: "torch.channels_last_3d"}


def check_memory_format(schema, args, kwargs) -> None:
    bound = bind(schema, args, kwargs)
    for a in schema.arguments:
        value = bound.get(a.name)
        if "MemoryFormat" in str(a.real_type) and value is not None:
            code = value if isinstance(value, int) else {torch.contiguous_format: 0, torch.preserve_format: 1}.get(value, 2)
            if code not in (0, 1):
                raise RuntimeError(f"{schema.name}: Neuron tensors only support contiguous or preserve memory format "
                                   f"(got {MEMORY_FORMAT_NAMES.get(code, value)}). Keep tensors in "
                                   "torch.contiguous_format on the neuron device.")


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
