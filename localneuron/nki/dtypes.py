"""NKI data types and how a value is rounded when it is stored into a tile of that type.

Every float tile is held as float32 on the host; a store rounds the value to the tile's
format (round to nearest even), so bf16/fp16/fp8 results carry hardware rounding error.
With NKI_PRECISE_FP=0 the rounding is skipped and everything behaves as fp32, which
separates algorithm bugs from precision loss (AWS's simulator offers the same switch).
"""
from dataclasses import dataclass

import numpy as np

from localneuron.ops import tracking
from localneuron.runtime.environment import read


@dataclass(frozen=True)
class FloatFormat:
    mantissa_bits: int
    min_normal_exponent: int   # exponent of the smallest normal number, 2**e
    max_finite: float
    has_inf: bool              # without inf (the OCP "fn" types) an overflow saturates, as torch converts


@dataclass(frozen=True, eq=False)
class NkiDtype:
    """One NKI data type (nl.bfloat16, nl.float8_e4m3fn_x4, ...).

    It is also what numpy and user code see: `str()` is its NKI name, it equals that name, the
    numpy dtype (or type) of the same data and itself, and numpy accepts it wherever a dtype goes
    (`np.zeros(shape, nl.bfloat16)`, `a.astype(nl.float8_e4m3)`) through its `dtype` attribute.
    """
    name: str
    itemsize: int
    kind: str                  # "float", "int", "bool" or "packed" (lanes small floats in one item)
    storage: type              # numpy type that holds one item in a simulated tile
    float_format: FloatFormat = None
    host_name: str = None      # numpy/ml_dtypes name of the host arrays (None: same as `name`)
    lanes: int = 1             # packed types: elements per item
    element: object = None     # packed types: the NkiDtype of one element

    @property
    def is_float(self):
        return self.kind == "float"

    @property
    def is_int(self):
        return self.kind in ("int", "bool")

    @property
    def is_packed(self):
        return self.kind == "packed"

    @property
    def dtype(self):
        """The numpy dtype of host arrays of this type (numpy reads this attribute)."""
        return host_dtype(self)

    def __repr__(self):
        return self.name

    __str__ = __repr__

    def __eq__(self, other):
        return other is self or (not isinstance(other, NkiDtype) and find(other) is self)

    def __hash__(self):
        return hash(self.name)


def _float(name, itemsize, mantissa, min_exp, max_finite, has_inf=True, host_name=None):
    return NkiDtype(name, itemsize, "float", np.float32, FloatFormat(mantissa, min_exp, max_finite, has_inf),
                    host_name)


def _packed(name, element, lanes, storage):
    return NkiDtype(name, np.dtype(storage).itemsize, "packed", storage, lanes=lanes, element=element)


float32 = NkiDtype("float32", 4, "float", np.float32)
tfloat32 = _float("tfloat32", 4, 10, -126, (2 - 2 ** -10) * 2.0 ** 127, host_name="float32")
bfloat16 = _float("bfloat16", 2, 7, -126, (2 - 2 ** -7) * 2.0 ** 127)
float16 = _float("float16", 2, 10, -14, 65504.0)
float8_e5m2 = _float("float8_e5m2", 1, 2, -14, 57344.0)
float8_e4m3 = _float("float8_e4m3", 1, 3, -6, 240.0)            # Neuron's IEEE-like e4m3
float8_e4m3fn = _float("float8_e4m3fn", 1, 3, -6, 448.0, has_inf=False)
# MX element types: no inf; an overflow saturates (OCP MX). fp4 is a storage format only inside _x4 items.
float4_e2m1fn = _float("float4_e2m1fn", 1, 1, 0, 6.0, has_inf=False)
# Four MX elements packed in one item (element 0 in the lowest bits): the operands of nisa.nc_matmul_mx
# and the results of nisa.quantize_mx (NeuronCore-v4).
float8_e4m3fn_x4 = _packed("float8_e4m3fn_x4", float8_e4m3fn, 4, np.uint32)
float8_e5m2_x4 = _packed("float8_e5m2_x4", float8_e5m2, 4, np.uint32)
float4_e2m1fn_x4 = _packed("float4_e2m1fn_x4", float4_e2m1fn, 4, np.uint16)
int8 = NkiDtype("int8", 1, "int", np.int8)
uint8 = NkiDtype("uint8", 1, "int", np.uint8)
int16 = NkiDtype("int16", 2, "int", np.int16)
uint16 = NkiDtype("uint16", 2, "int", np.uint16)
int32 = NkiDtype("int32", 4, "int", np.int32)
uint32 = NkiDtype("uint32", 4, "int", np.uint32)
bool_ = NkiDtype("bool_", 1, "bool", np.uint8, host_name="bool")

ALL = (float32, tfloat32, bfloat16, float16, float8_e5m2, float8_e4m3, float8_e4m3fn, float8_e4m3fn_x4,
       float8_e5m2_x4, float4_e2m1fn_x4, int8, uint8, int16, uint16, int32, uint32, bool_)
BY_NAME = {d.name: d for d in ALL}
PACKED = tuple(d for d in ALL if d.is_packed)
# Spellings from numpy, torch, ml_dtypes and the older NKI compiler that mean one of ours.
ALIASES = {"float": float32, "bool": bool_, "half": float16, "float8_e4m3fnuz": float8_e4m3fn,
           "float8e4": float8_e4m3, "float8e5": float8_e5m2, "fp32": float32, "bf16": bfloat16}
# NKI has no 64-bit types. As the device does with 64-bit tensors, a kernel computes them in the
# 32-bit type, with one warning per type (arguments, nl.ndarray dtypes and tensors alike).
NARROWED = {"float64": float32, "int64": int32, "uint64": uint32}


def ml_dtypes_module(what):
    """ml_dtypes (the `nki` extra), which gives numpy the narrow float types; only host arrays of those types
    need it, so the core runs without it and says what to install when they are used."""
    try:
        import ml_dtypes
    except ImportError:
        raise ImportError(f"{what} needs the ml_dtypes package (numpy has no bfloat16, fp8 or fp4 arrays without "
                          f"it); install it with: pip install 'localneuron[nki]'") from None
    return ml_dtypes


def host_dtype(dtype):
    """The numpy dtype of host arrays holding `dtype` data: numpy's own for float32/float16/integers, ml_dtypes
    types for the narrow floats, a one-field record named after a packed type (so the array says what it holds)."""
    cached = _HOST.get(dtype.name)
    if cached is None:
        name = dtype.host_name or dtype.name
        if dtype.is_packed:
            cached = np.dtype([(dtype.name, dtype.storage)])
        elif hasattr(np, name):
            cached = np.dtype(name)
        else:
            cached = np.dtype(getattr(ml_dtypes_module(f"a host array of {dtype.name}"), name))
        _HOST[dtype.name] = cached
    return cached


_HOST = {}


def find(value):
    """The NkiDtype `value` names (an NkiDtype, a name, a numpy/ml_dtypes/torch dtype), or None."""
    if isinstance(value, NkiDtype):
        return value
    if isinstance(value, str):
        name = value
    elif isinstance(value, np.dtype) and value.names is not None and len(value.names) == 1:
        packed = BY_NAME.get(value.names[0])
        return packed if packed is not None and packed.is_packed else None
    elif type(value).__module__ == "torch" or str(value).startswith("torch."):
        name = str(value)[len("torch."):]
    else:
        try:
            name = np.dtype(value).name
        except TypeError:
            return None
    if name == "float32":   # tfloat32 data lives in float32 arrays; float32 data is float32
        return float32
    return BY_NAME.get(name) or ALIASES.get(name)


def as_dtype(value):
    """Map an NKI, numpy, torch or string dtype to an NkiDtype (64-bit types narrow to 32-bit, see NARROWED)."""
    found = find(value)
    if found is not None:
        return found
    name = str(value)[len("torch."):] if str(value).startswith("torch.") else str(value)
    if not isinstance(value, str):
        try:
            name = np.dtype(value).name
        except TypeError:
            pass
    if name in NARROWED:
        found = NARROWED[name]
        tracking.warn_once(f"nki:{name}", f"{name} is not an NKI data type: NKI kernels compute it as {found.name}, "
                           f"with {found.name}'s precision and range. Pass {found.name} data to the kernel.")
        return found
    raise TypeError(f"dtype {value!r} is not an NKI data type; use one of {sorted(BY_NAME)}")


def precise_fp():
    """NKI_PRECISE_FP=1 (default) rounds stores to the tile's format; 0 keeps fp32."""
    return read("NKI_PRECISE_FP")


def round_to_format(values, fmt):
    """Round float values to the nearest representable number of `fmt` (ties to even)."""
    x = np.asarray(values, dtype=np.float64)
    _, exponent = np.frexp(x)
    # Subnormals share the quantum of the smallest normal binade.
    exponent = np.maximum(exponent, fmt.min_normal_exponent + 1)
    quantum = np.ldexp(1.0, exponent - 1 - fmt.mantissa_bits)
    with np.errstate(invalid="ignore"):
        rounded = np.round(x / quantum) * quantum
        overflow = np.abs(rounded) > fmt.max_finite
    if overflow.any():
        limit = np.inf if fmt.has_inf else fmt.max_finite
        rounded = np.where(overflow, np.copysign(limit, x), rounded)
    return rounded.astype(np.float32)


def to_storage(values, dtype, precise=True):
    """Convert engine results (fp32) to the host representation of a tile of `dtype`."""
    if dtype.is_float:
        values = np.asarray(values, dtype=np.float32)
        if precise and dtype.float_format is not None:
            return round_to_format(values, dtype.float_format)
        return values
    if dtype.is_packed:   # raw items (instructions that read or write MX elements pack them)
        return np.asarray(values).astype(dtype.storage)
    info = np.iinfo(dtype.storage) if dtype.kind == "int" else np.iinfo(np.uint8)
    values = np.asarray(values)
    if values.dtype.kind == "f":
        # Float to integer conversion rounds to nearest and saturates, like the engines' output cast.
        values = np.clip(np.rint(np.nan_to_num(values, nan=0.0)), info.min, info.max)
    if dtype.kind == "bool":
        values = values != 0
    return values.astype(dtype.storage)


def promote(a, b):
    """NKI's type promotion for two operand dtypes (the documented special cases first)."""
    if a is b:
        return a
    pair = {a.name, b.name}
    if pair == {"float16", "bfloat16"}:
        return float32
    if pair == {"float8_e4m3", "float8_e5m2"}:
        return bfloat16
    if pair == {"int32", "uint32"}:
        return float32
    if a.is_float != b.is_float:
        return a if a.is_float else b
    if a.is_float:
        return a if a.itemsize >= b.itemsize else b
    if a.kind == "bool" or b.kind == "bool":
        return b if a.kind == "bool" else a
    signed = np.iinfo(a.storage).min < 0 or np.iinfo(b.storage).min < 0
    width = max(a.itemsize, b.itemsize)
    if signed and (np.iinfo(a.storage).min == 0 or np.iinfo(b.storage).min == 0):
        unsigned_width = a.itemsize if np.iinfo(a.storage).min == 0 else b.itemsize
        width = max(width, min(4, unsigned_width * 2))
    return {1: int8, 2: int16, 4: int32}[width] if signed else {1: uint8, 2: uint16, 4: uint32}[width]


# --- packed MX items ---------------------------------------------------------------------------

def _element_bits(dtype):
    return 8 * dtype.itemsize // dtype.lanes


def pack(values, dtype, precise=True):
    """Float values [..., lanes * n] -> packed items [..., n] of `dtype` (element 0 in the lowest bits);
    each element is rounded to the element format first (an overflow saturates, as MX conversion does)."""
    ml_dtypes = ml_dtypes_module(f"packing {dtype.name} items")
    values = np.asarray(values, dtype=np.float32)
    if values.shape[-1] % dtype.lanes:
        raise ValueError(f"{dtype}: the last axis ({values.shape[-1]} elements) must be a multiple of "
                         f"{dtype.lanes}, the elements one item packs")
    element = dtype.element
    limit = element.float_format.max_finite
    rounded = round_to_format(np.clip(values, -limit, limit), element.float_format)
    codes = rounded.astype(getattr(ml_dtypes, element.name)).view(np.uint8).astype(dtype.storage)
    codes = codes.reshape(*values.shape[:-1], values.shape[-1] // dtype.lanes, dtype.lanes)
    bits = _element_bits(dtype)
    shifts = (np.arange(dtype.lanes) * bits).astype(dtype.storage)
    return np.bitwise_or.reduce(codes << shifts, axis=-1).astype(dtype.storage)


def unpack(items, dtype):
    """Packed items [..., n] -> their float32 elements [..., lanes * n]."""
    ml_dtypes = ml_dtypes_module(f"unpacking {dtype.name} items")
    items = np.asarray(items).astype(dtype.storage, copy=False)
    bits = _element_bits(dtype)
    shifts = (np.arange(dtype.lanes) * bits).astype(dtype.storage)
    codes = ((items[..., None] >> shifts) & ((1 << bits) - 1)).astype(np.uint8)
    values = codes.view(getattr(ml_dtypes, dtype.element.name)).astype(np.float32)
    return values.reshape(*items.shape[:-1], items.shape[-1] * dtype.lanes)


# --- host arrays -------------------------------------------------------------------------------

def to_host(stored, dtype):
    """A simulated tile's stored values as the host array of its NKI dtype (bfloat16 data as an
    ml_dtypes bfloat16 array, packed items as their record type)."""
    stored = np.asarray(stored)
    if dtype.is_packed:
        return np.ascontiguousarray(stored).view(host_dtype(dtype))
    return stored.astype(host_dtype(dtype))


def from_host(array, dtype, precise=True):
    """Host values (any numpy array) as the stored values of a tile of `dtype`."""
    array = np.asarray(array)
    if dtype.is_packed:
        if array.dtype.names is not None:
            return np.ascontiguousarray(array).view(dtype.storage).reshape(array.shape)
        return array.astype(dtype.storage)
    if dtype.is_float or array.dtype.kind not in "iub":
        array = array.astype(np.float32) if array.dtype != np.float32 else array
    return to_storage(array, dtype, precise)


def static_cast(array, dtype):
    """Convert host values to `dtype` like a C++ static_cast per element: floats round to nearest
    even (saturating for types without inf), float to integer truncates toward zero, and a packed
    type packs (or unpacks) `lanes` elements per item along the last axis."""
    array = np.asarray(array)
    source = find(array.dtype)
    target = as_dtype(dtype)
    if source is not None and source.is_packed:
        array = unpack(np.ascontiguousarray(array).view(source.storage).reshape(array.shape), source)
    if target.is_packed:
        return to_host(pack(array, target), target)
    if target.is_float:
        values = array.astype(np.float32)
        return to_host(round_to_format(values, target.float_format) if target.float_format else values, target)
    return array.astype(host_dtype(target))


def sizeinbytes(dtype):
    """Bytes one item of `dtype` occupies (a packed item counts once)."""
    return as_dtype(dtype).itemsize


def is_float_type(dtype):
    found = find(dtype)
    return found is not None and found.is_float


def finfo(dtype):
    """Machine limits of a float type, as numpy/ml_dtypes report them (`.max`, `.eps`, `.dtype`)."""
    found = as_dtype(dtype)
    if not found.is_float:
        raise TypeError(f"finfo: {found} is not a float type")
    return ml_dtypes_module(f"finfo({found})").finfo(host_dtype(found))
