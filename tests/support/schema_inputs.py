"""Calls of an ATen overload built from its schema alone, for tests/support/dispatcher_sweep.py.

candidate_calls(schema, dtype) yields (args, kwargs) tuples, most plausible first, until one runs on the
CPU. Every candidate uses one tensor shape throughout (SHAPES, tried in order) and one "variant" (0/1)
that flips the name-based choices below (dim 0 or -1, flags False or True, ...). Arguments with a default
keep it, except `device` (always given, as the CPU: the device side turns it into neuron) and, for
factories (no tensor argument), `dtype`. Out= tensors start empty and are resized by the op; their
dtypes are those the functional overload returns for the same call when there is one (else the swept
dtype first, then bool / int64 / float32: comparison and index ops write those).
"""
import itertools
import re

import torch

SHAPES = ((3, 3), (4,), (2, 3, 3), (1, 2, 3, 3), ())
OUT_DTYPES = (None, torch.bool, torch.int64, torch.float32)  # None: the swept dtype
# Argument types no generic value exists for: an overload taking one (without a default) is skipped.
UNCONSTRUCTIBLE = ("Storage", "__torch__", "Dimname", "Stream", "Any", "Future", "Await", "Capsule")

INDEX_TENSOR_NAMES = {"index", "indices", "idx", "offsets", "lengths", "per_sample_weights_indices", "argmax",
                      "sorted_sequence_indices", "crow_indices", "col_indices", "row_indices", "ccol_indices",
                      "labels", "sorter"}
MASK_TENSOR_NAMES = {"mask", "attn_mask", "padding_mask"}
# Optional per-channel statistics that the CPU kernels dereference without checking (None would crash them).
STATS_TENSOR_NAMES = {"running_mean": torch.zeros, "running_var": torch.ones, "save_mean": torch.zeros,
                      "save_invstd": torch.ones, "save_var": torch.ones}

INT_BY_NAME = {  # name -> (variant 0, variant 1)
    "dim": (0, -1), "dim0": (0, 1), "dim1": (0, 1), "dim2": (1, 0), "axis": (0, -1), "start_dim": (0, 1),
    "end_dim": (-1, 1), "start": (0, 1), "end": (2, 3), "length": (1, 2), "step": (1, 2), "k": (1, 2),
    "n": (2, 1), "groups": (1, 1), "size": (2, 3), "repeats": (2, 1), "diagonal": (0, 1), "offset": (0, 1),
    "chunks": (1, 2), "sections": (1, 2), "split_size": (1, 2), "bins": (4, 2), "num_samples": (2, 1),
    "high": (5, 3), "low": (0, 1), "window_length": (4, 3), "N": (3, 2), "M": (3, 2), "reduction": (1, 2),
    "padding_idx": (-1, 0), "ignore_index": (-100, 0), "num_classes": (-1, 4), "output_size": (2, 1),
    "upscale_factor": (1, 1), "downscale_factor": (1, 1), "blank": (0, 0), "index": (0, 1), "p": (2, 1),
    "num_groups": (1, 1), "input_size": (3, 3), "hidden_size": (3, 3), "shift": (1, 1), "row": (3, 2),
    "col": (3, 2), "self_num_batch_dims": (0, 1), "batch_size": (1, 1), "dimension": (0, -1), "unbiased": (0, 1),
}
FLOAT_BY_NAME = {
    "eps": 1e-5, "p": 0.5, "momentum": 0.1, "negative_slope": 0.01, "beta": 1.0, "threshold": 1.0, "margin": 1.0,
    "lambd": 0.5, "scale": 1.0, "alpha": 1.0, "min_val": -1.0, "max_val": 1.0, "exponential_average_factor": 0.1,
    "epsilon": 1e-5, "lower": 0.125, "upper": 0.25, "delta": 1.0, "label_smoothing": 0.0,
}
SCALAR_BY_NAME = {"min": -0.5, "max": 0.5, "lower": 0.125, "upper": 0.25, "start": 0, "end": 5, "step": 1,
                  "threshold": 0.5, "lambd": 0.5, "low": 0, "high": 5}
STR_BY_NAME = {  # name -> (variant 0, variant 1)
    "reduce": ("sum", "mean"), "approximate": ("none", "tanh"), "indexing": ("ij", "xy"), "UPLO": ("L", "U"),
    "uplo": ("L", "U"), "side": ("left", "right"), "mode": ("reduced", "constant"), "interpolation": ("linear", "lower"),
    "equation": ("ij,jk->ik", "ii->i"), "padding": ("same", "valid"), "rounding_mode": ("trunc", "floor"),
    "reduction": ("mean", "sum"), "norm": ("backward", "ortho"), "ord": ("fro", "nuc"), "driver": ("gelsd", "gelsy"),
    "compute_mode": ("use_mm_for_euclid_dist_if_necessary", "donot_use_mm_for_euclid_dist"),
}


OPTIONAL_FILLED = ("int", "float", "number", "bool", "List[int]")


def spatial_dims(op_name: str) -> int | None:
    """The N of an N-d op (conv2d, upsample_nearest3d_backward, reflection_pad1d, ...) from its name."""
    m = re.search(r"([123])d(?:_|$)", op_name)
    return int(m.group(1)) if m else None


def _int_list(name, shape, variant, spatial, pad_op):
    nd = len(shape)
    k = spatial or (max(1, nd - 2) if variant == 0 else max(1, nd - 1))
    if name in ("size", "shape", "sizes") and variant == 0:
        return list(shape)
    if name == "stride" and variant == 0 and not spatial:
        return list(torch.empty(shape).stride()) if shape else []
    if name in ("dim", "axis", "axes", "dim_list", "opt_dim"):
        return [0] if variant == 0 else [-1]
    if name in ("dims", "perm", "permutation"):
        return list(reversed(range(nd)))
    if name in ("repeats", "sizes", "size", "shape"):
        return [1] * nd if variant == 0 else [2] * nd
    if name == "output_size" and spatial and variant == 0:
        return list(shape[-k:])  # resampling to the same size: grad_output and input of a backward agree
    if name == "input_size" and spatial:
        return list(shape)
    if name in ("kernel_size", "output_size"):
        return [2] * k
    if name in ("stride", "dilation"):
        return [1] * k
    if name == "padding" and pad_op:
        return [1] * (2 * k)
    if name in ("padding", "output_padding"):
        return [0] * k
    if name in ("split_sizes", "split_size"):
        return [1, shape[0] - 1] if shape and shape[0] > 1 else [1]
    if name == "normalized_shape":
        return list(shape[-1:])
    if name in ("pad",):
        return [1, 1]
    if name in ("shifts",):
        return [1]
    return [2] if variant == 0 else [1]


def _tensor(name, shape, dtype, gen, variant):
    if name in INDEX_TENSOR_NAMES:
        m = min(shape) if shape else 1
        return torch.randint(0, m, shape, generator=gen)
    if name in MASK_TENSOR_NAMES:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if not dtype.is_floating_point and not dtype.is_complex:
        return torch.randint(1, 10, shape, generator=gen).to(dtype)
    # variant 1: values in [0, 1) (probabilities, logs, square roots)
    return (torch.randn if variant == 0 else torch.rand)(shape, generator=gen).to(dtype)


def arguments_problem(schema) -> str | None:
    """Why no call of this overload can be built, or None."""
    for a in schema.arguments:
        t = str(a.real_type)
        if not a.has_default_value() and any(u in t for u in UNCONSTRUCTIBLE):
            return f"argument {a.name}: {t} cannot be generated"
    return None


def is_out(a) -> bool:
    return a.kwarg_only and a.alias_info is not None and a.alias_info.is_write


def is_factory(schema) -> bool:
    return not any("Tensor" in str(a.real_type) for a in schema.arguments if not a.kwarg_only or
                   not a.has_default_value()) and any(a.name == "device" for a in schema.arguments)


def _value(a, shape, variant, dtype, out_dtype, factory, gen, spatial=None, pad_op=False):
    """(present, value) for one argument; present=False leaves it to its default."""
    t, name = str(a.real_type), a.name
    if name == "device" and "Device" in t:
        return True, torch.device("cpu")
    if name == "dtype" and "ScalarType" in t and (factory or not a.has_default_value()):
        return True, dtype
    if a.has_default_value() and not (variant == 1 and t == "Optional[number]"):  # clamp needs min or max
        return False, None
    if is_out(a):
        od = torch.int64 if name in INDEX_TENSOR_NAMES else (out_dtype or dtype)
        return True, [torch.empty(0, dtype=od) for _ in range(2)] if t == "List[Tensor]" else torch.empty(0, dtype=od)
    if t == "Optional[Tensor]" and name in STATS_TENSOR_NAMES:
        channels = shape[1] if len(shape) > 1 else (shape[0] if shape else 1)
        return True, STATS_TENSOR_NAMES[name](channels, dtype=dtype if dtype.is_floating_point else torch.float32)
    if t.startswith("Optional["):
        inner = t[len("Optional["):-1]
        # None first; variant 1 gives a value (clamp needs min or max; upsample output_size or scale_factors)
        if (variant == 1 or name == "output_size") and (inner in OPTIONAL_FILLED or name in ("min", "max")):
            t = inner
        else:
            return True, None
    if t == "Tensor":
        return True, _tensor(name, shape, dtype, gen, variant)
    if t == "List[Tensor]":
        return True, [_tensor(name, shape, dtype, gen, variant) for _ in range(2)]
    if t == "List[Optional[Tensor]]":
        m = min(shape) if shape else 1
        return True, [torch.randint(0, m, (2,), generator=gen)]
    if t == "int":
        if name in INT_BY_NAME:
            return True, INT_BY_NAME[name][variant]
        return True, 1 if variant == 0 else 2
    if t == "List[int]":
        return True, _int_list(name, shape, variant, spatial, pad_op)
    if t == "float":
        return True, FLOAT_BY_NAME.get(name, 0.5)
    if t == "number":
        return True, SCALAR_BY_NAME.get(name, 2)
    if t == "List[number]":
        return True, [2, 3]
    if t == "bool":
        return True, bool(variant)
    if t == "List[bool]":
        return True, [True] * (3 if variant == 0 else 2)
    if t == "str":
        return True, STR_BY_NAME.get(name, ("sum", "none"))[variant]
    if t == "ScalarType":
        return True, dtype
    if t == "Layout":
        return True, torch.strided
    if t == "MemoryFormat":
        return True, torch.contiguous_format
    if t == "Device":
        return True, torch.device("cpu")
    raise ValueError(f"argument {name}: no generator for {t}")


def functional_sibling(schema, overloads):
    """The overload of the same op that takes schema's arguments minus the out= ones and has no out=."""
    want = [(a.name, str(a.real_type)) for a in schema.arguments if not is_out(a)]
    for other in overloads:
        if not any(is_out(a) for a in other.arguments) and \
                [(a.name, str(a.real_type)) for a in other.arguments] == want:
            return other
    return None


def _rnn_weights(gates, dtype, gen, inp=3, hidden=4):
    return [torch.randn(shape, generator=gen).to(dtype) for shape in
            ((gates * hidden, inp), (gates * hidden, hidden), (gates * hidden,), (gates * hidden,))]


def _cell(gates, dtype, gen):
    x, h = torch.randn(2, 3, generator=gen).to(dtype), torch.randn(2, 4, generator=gen).to(dtype)
    hx = [h, torch.randn(2, 4, generator=gen).to(dtype)] if gates == 4 else h
    return [x, hx, *_rnn_weights(gates, dtype, gen)], {}


def _rnn(gates, dtype, gen):
    x = torch.randn(2, 1, 3, generator=gen).to(dtype)  # (seq, batch, features)
    h = [torch.randn(1, 1, 4, generator=gen).to(dtype) for _ in range(2 if gates == 4 else 1)]
    return [x, h if gates == 4 else h[0], _rnn_weights(gates, dtype, gen), True, 1, 0.0, False, False, False], {}


def _grid(dtype, gen):
    return torch.rand(1, 2, 2, 2, generator=gen).mul(2).sub(1).to(dtype)  # sampling points in [-1, 1]


# Overloads whose argument constraints the generic rules cannot meet (weights sized by the gate count,
# sampling grids): a call built by hand, (dtype, generator) -> (args, kwargs), tried first.
HAND_BUILT_CALLS = {
    "aten::lstm_cell": lambda dtype, gen: _cell(4, dtype, gen),
    "aten::gru_cell": lambda dtype, gen: _cell(3, dtype, gen),
    "aten::rnn_tanh_cell": lambda dtype, gen: _cell(1, dtype, gen),
    "aten::rnn_relu_cell": lambda dtype, gen: _cell(1, dtype, gen),
    "aten::lstm.input": lambda dtype, gen: _rnn(4, dtype, gen),
    "aten::gru.input": lambda dtype, gen: _rnn(3, dtype, gen),
    "aten::rnn_tanh.input": lambda dtype, gen: _rnn(1, dtype, gen),
    "aten::rnn_relu.input": lambda dtype, gen: _rnn(1, dtype, gen),
    "aten::grid_sampler_2d": lambda dtype, gen: (
        [torch.randn(1, 1, 3, 3, generator=gen).to(dtype), _grid(dtype, gen), 0, 0, False], {}),
    "aten::grid_sampler_2d_backward": lambda dtype, gen: (
        [torch.randn(1, 1, 2, 2, generator=gen).to(dtype), torch.randn(1, 1, 3, 3, generator=gen).to(dtype),
         _grid(dtype, gen), 0, 0, False, [True, True]], {}),
    "aten::grid_sampler": lambda dtype, gen: (
        [torch.randn(1, 1, 3, 3, generator=gen).to(dtype), _grid(dtype, gen), 0, 0, False], {}),
}


def _empty_like(result):
    """An empty out= argument for one result of the functional sibling (the op resizes it)."""
    if isinstance(result, torch.Tensor):
        return torch.empty(0, dtype=result.dtype)
    if isinstance(result, (list, tuple)) and result and all(isinstance(x, torch.Tensor) for x in result):
        return [torch.empty(0, dtype=x.dtype) for x in result]
    raise ValueError(f"the functional sibling returns {type(result).__name__}, no out= tensor to match")


def candidate_calls(schema, dtype, functional=None, seed=0):
    """Yield (args, kwargs) for schema with tensors of dtype, most plausible first, or (None, exception)
    for a candidate the CPU refused already. Each call is fresh (the caller may mutate it); tensors are
    drawn from a generator seeded per candidate. functional: callable for the functional sibling of an
    out= overload (it gives the out= tensors their dtypes)."""
    full = schema.name + ("." + schema.overload_name if schema.overload_name else "")
    if full in HAND_BUILT_CALLS:
        yield HAND_BUILT_CALLS[full](dtype, torch.Generator().manual_seed(seed))
    factory = is_factory(schema)
    outs = [a for a in schema.arguments if is_out(a)]
    out_dtypes = OUT_DTYPES if outs and functional is None else (None,)
    base = schema.name.split("::")[-1]
    spatial, pad_op = spatial_dims(base), "pad" in base
    # An N-d op gets (batched and unbatched) N-d inputs first.
    shapes = (((1, 2) + (3,) * spatial, (2,) + (3,) * spatial) if spatial else ()) + SHAPES
    for out_dtype, variant, shape in itertools.product(out_dtypes, (0, 1), shapes):
        if out_dtype == dtype:
            continue
        gen = torch.Generator().manual_seed(seed)
        args, kwargs = [], {}
        positional = True  # until a positional argument is left to its default: the rest go by name
        for a in schema.arguments:
            present, value = _value(a, shape, variant, dtype, out_dtype, factory, gen, spatial, pad_op)
            if not present:
                positional = positional and a.kwarg_only
                continue
            if a.kwarg_only or not positional:
                kwargs[a.name] = value
            else:
                args.append(value)
        if outs and functional is not None:
            try:
                results = functional(*args, **{k: v for k, v in kwargs.items() if k not in {o.name for o in outs}})
            except Exception as e:  # noqa: BLE001  (the CPU refuses this call: next candidate)
                yield None, e
                continue
            if not isinstance(results, tuple):
                results = (results,)
            # Functionalized in-place ops return (results, *updated inputs): the out= ones come first.
            results = results[:len(outs)]
            if len(results) != len(outs):
                yield None, ValueError(f"{len(results)} results for {len(outs)} out= arguments")
                continue
            try:
                kwargs.update({o.name: _empty_like(r) for o, r in zip(outs, results)})
            except ValueError as e:
                yield None, e
                continue
        yield args, kwargs
