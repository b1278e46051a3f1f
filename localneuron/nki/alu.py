"""ALU operators: the `op=` of tensor_tensor / tensor_scalar / tensor_reduce, and the nl
functions of the same name (nl.add(x, y) builds a new tile with one instruction).

Which engine implements which operator follows the published ALU operator table in
https://github.com/aws-neuron/aws-neuron-sdk/blob/v2.26.1/nki/api/nki.api.shared.rst.
"""
from dataclasses import dataclass

import numpy as np

VECTOR, GPSIMD, SCALAR = "vector", "gpsimd", "scalar"


@dataclass(frozen=True, eq=False)
class AluOp:
    name: str
    fn: object
    engines: frozenset
    kind: str          # "arith", "compare", "logical" or "bitvec" (bitvec works on raw integer bits)

    # nl.add(x, y) builds a new tile with one instruction. How is the language's business
    # (language/elementwise.py installs it when imported), so this table imports nothing above it.
    build_tile = None

    def __call__(self, x, y, dtype=None):
        return type(self).build_tile(self, x, y, dtype)

    def __repr__(self):
        return f"nl.{self.name}"

    def apply(self, a, b):
        with np.errstate(all="ignore"):
            result = self.fn(a, b)
        if self.kind in ("compare", "logical"):
            return result.astype(np.float32)
        return result


def _op(name, fn, engines, kind="arith"):
    return AluOp(name, fn, frozenset(engines), kind)


def _logical(fn):
    return lambda a, b: fn(a != 0, b != 0)


add = _op("add", np.add, {VECTOR, GPSIMD, SCALAR})
multiply = _op("multiply", np.multiply, {VECTOR, GPSIMD, SCALAR})
subtract = _op("subtract", np.subtract, {VECTOR, GPSIMD})
divide = _op("divide", np.divide, {VECTOR})
maximum = _op("maximum", np.maximum, {VECTOR, GPSIMD})
minimum = _op("minimum", np.minimum, {VECTOR, GPSIMD})
power = _op("power", np.power, {GPSIMD})
mod = _op("mod", np.mod, {VECTOR})
fmod = _op("fmod", np.fmod, {VECTOR})
equal = _op("equal", np.equal, {VECTOR}, "compare")
not_equal = _op("not_equal", np.not_equal, {VECTOR}, "compare")
less = _op("less", np.less, {VECTOR}, "compare")
less_equal = _op("less_equal", np.less_equal, {VECTOR}, "compare")
greater = _op("greater", np.greater, {VECTOR}, "compare")
greater_equal = _op("greater_equal", np.greater_equal, {VECTOR}, "compare")
logical_and = _op("logical_and", _logical(np.logical_and), {VECTOR}, "logical")
logical_or = _op("logical_or", _logical(np.logical_or), {VECTOR}, "logical")
logical_xor = _op("logical_xor", _logical(np.logical_xor), {VECTOR}, "logical")
bitwise_and = _op("bitwise_and", np.bitwise_and, {VECTOR}, "bitvec")
bitwise_or = _op("bitwise_or", np.bitwise_or, {VECTOR}, "bitvec")
bitwise_xor = _op("bitwise_xor", np.bitwise_xor, {VECTOR}, "bitvec")
left_shift = _op("left_shift", np.left_shift, {VECTOR}, "bitvec")
right_shift = _op("right_shift", np.right_shift, {VECTOR}, "bitvec")

ALL = (add, multiply, subtract, divide, maximum, minimum, power, mod, fmod, equal, not_equal,
       less, less_equal, greater, greater_equal, logical_and, logical_or, logical_xor,
       bitwise_and, bitwise_or, bitwise_xor, left_shift, right_shift)

# Reductions tensor_reduce can perform, with the numpy reduction that implements each.
REDUCTIONS = {add: np.add.reduce, multiply: np.multiply.reduce, maximum: np.maximum.reduce,
              minimum: np.minimum.reduce, bitwise_and: np.bitwise_and.reduce,
              bitwise_or: np.bitwise_or.reduce, bitwise_xor: np.bitwise_xor.reduce}
