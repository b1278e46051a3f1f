"""Neuron has no 64-bit arithmetic: float64 computes as float32 and int64 as int32, while tensors
keep their 64-bit dtype. This runs an op the way the device would: 64-bit inputs narrowed, the op
computed, results widened back (int64 results wrap around like int32)."""
import torch

from localneuron import _C
from localneuron.ops import arguments


def _narrow(x, narrowed: dict):
    if isinstance(x, torch.Tensor) and x.device.type == "neuron":
        if x.dtype == torch.float64:
            y = x.to(torch.float32)
        elif x.dtype == torch.int64:
            y = wrap_to_int32(x)
        else:
            return x
        narrowed[id(y)] = x
        return y
    if x is torch.float64:
        return torch.float32
    return x


def wrap_to_int32(t: torch.Tensor) -> torch.Tensor:
    return t.to(torch.int32).to(torch.int64)


def run_narrowed(op, args, kwargs, expected_dtypes):
    schema = op._schema
    narrowed: dict = {}
    small_args, small_kwargs = arguments.map_arguments(lambda x: _narrow(x, narrowed), args, kwargs)
    previous = _C.set_device_route_only(True)
    try:
        result = op(*small_args, **small_kwargs)
    finally:
        _C.set_device_route_only(previous)

    for original, small in arguments.written_arguments(schema, (args, kwargs), (small_args, small_kwargs)):
        _write_back(original, small)

    flat_expected = iter(expected_dtypes or ())

    def widen(t: torch.Tensor) -> torch.Tensor:
        expected = next(flat_expected, None)
        if id(t) in narrowed:
            return narrowed[id(t)]
        if expected is not None and t.dtype != expected:
            return t.to(expected)
        if t.dtype == torch.int64:
            return wrap_to_int32(t)
        return t

    return arguments.map_tensors(widen, result)


def _write_back(original, small) -> None:
    if isinstance(original, torch.Tensor):
        if original is small:
            return
        if original.shape != small.shape:
            original.resize_(small.shape)
        original.copy_(wrap_to_int32(small) if small.dtype == torch.int64 else small)
    elif isinstance(original, (list, tuple)):
        for o, s in zip(original, small):
            _write_back(o, s)


def expected_output_dtypes(op, args, kwargs):
    """Output dtypes of the op at full width, from its meta kernel (None if it has none)."""
    ok, out = arguments.run_on_meta(op, args, kwargs)
    if not ok:
        return None
    flat, _ = arguments.tree_flatten(out)
    return [x.dtype for x in flat if isinstance(x, torch.Tensor)]
