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
    name: str
    itemsize: int
    kind: str                  # "float", "int" or "bool"
    storage: type              # numpy type that holds values on the host
    float_format: FloatFormat = None
    min_target: str = "gen2"   # first NeuronCore generation with this type

    @property
    def is_float(self):
        return self.kind == "float"

    @property
    def is_int(self):
        return self.kind in ("int", "bool")

    def __repr__(self):
        return self.name


def _float(name, itemsize, mantissa, min_exp, max_finite, has_inf=True, min_target="gen2"):
    return NkiDtype(name, itemsize, "float", np.float32,
                    FloatFormat(mantissa, min_exp, max_finite, has_inf), min_target)


float32 = NkiDtype("float32", 4, "float", np.float32)
tfloat32 = _float("tfloat32", 4, 10, -126, (2 - 2 ** -10) * 2.0 ** 127)
bfloat16 = _float("bfloat16", 2, 7, -126, (2 - 2 ** -7) * 2.0 ** 127)
float16 = _float("float16", 2, 10, -14, 65504.0)
float8_e5m2 = _float("float8_e5m2", 1, 2, -14, 57344.0)
float8_e4m3 = _float("float8_e4m3", 1, 3, -6, 240.0)            # Neuron's IEEE-like e4m3
float8_e4m3fn = _float("float8_e4m3fn", 1, 3, -6, 448.0, has_inf=False, min_target="gen4")
int8 = NkiDtype("int8", 1, "int", np.int8)
uint8 = NkiDtype("uint8", 1, "int", np.uint8)
int16 = NkiDtype("int16", 2, "int", np.int16)
uint16 = NkiDtype("uint16", 2, "int", np.uint16)
int32 = NkiDtype("int32", 4, "int", np.int32)
uint32 = NkiDtype("uint32", 4, "int", np.uint32)
bool_ = NkiDtype("bool_", 1, "bool", np.uint8)

ALL = (float32, tfloat32, bfloat16, float16, float8_e5m2, float8_e4m3, float8_e4m3fn,
       int8, uint8, int16, uint16, int32, uint32, bool_)
BY_NAME = {d.name: d for d in ALL}
# Spellings from numpy, torch and ml_dtypes that mean one of ours.
ALIASES = {"float": float32, "bool": bool_, "half": float16, "float8_e4m3fnuz": float8_e4m3fn}
# NKI has no 64-bit types. As the device does with 64-bit tensors, a kernel computes them in the
# 32-bit type, with one warning per type (arguments, nl.ndarray dtypes and tensors alike).
NARROWED = {"float64": float32, "int64": int32, "uint64": uint32}


def as_dtype(value):
    """Map an NKI, numpy, torch or string dtype to an NkiDtype (64-bit types narrow to 32-bit, see NARROWED)."""
    if isinstance(value, NkiDtype):
        return value
    name = str(value)
    if name.startswith("torch."):
        name = name[len("torch."):]
    elif not isinstance(value, str):
        name = np.dtype(value).name
    found = BY_NAME.get(name) or ALIASES.get(name)
    if found is None and name in NARROWED:
        found = NARROWED[name]
        tracking.warn_once(f"nki:{name}", f"{name} is not an NKI data type: NKI kernels compute it as {found.name}, "
                           f"with {found.name}'s precision and range. Pass {found.name} data to the kernel.")
    if found is None:
        raise TypeError(f"dtype {value!r} is not an NKI data type; use one of {sorted(BY_NAME)}")
    return found


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
