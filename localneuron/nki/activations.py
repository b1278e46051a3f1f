"""Activation functions: the `op=` of nisa.activation, and the nl unary math functions.

The Scalar engine evaluates them in fp32 (the hardware uses piece-wise polynomials; exact
numpy functions stand in for them here).
"""
import math
import warnings
from dataclasses import dataclass

import numpy as np


class ActivationRangeWarning(UserWarning):
    """An activation got inputs outside the range its hardware approximation is valid for."""


@dataclass(frozen=True, eq=False)
class ActivationFunction:
    name: str
    fn: object
    valid_range: tuple = None   # (low, high) of |x| or x where the ScalarE approximation holds

    # nl.exp(x) builds a new tile with one instruction. How is the language's business
    # (language/elementwise.py installs it when imported), so this table imports nothing above it.
    build_tile = None

    def __call__(self, x, dtype=None):
        return type(self).build_tile(self, x, dtype)

    def __repr__(self):
        return f"nl.{self.name}"

    def apply(self, x):
        x = np.asarray(x, dtype=np.float32)
        if self.valid_range is not None:
            self._check_range(x)
        with np.errstate(all="ignore"):
            return self.fn(x).astype(np.float32)

    def _check_range(self, x):
        low, high, magnitude = self.valid_range
        values = np.abs(x) if magnitude else x
        finite = values[np.isfinite(values)]
        if finite.size and (finite.min() < low or finite.max() > high):
            where = "|x|" if magnitude else "x"
            warnings.warn(f"nl.{self.name}: inputs outside the documented valid range {low:g} <= {where} <= "
                          f"{high:g}; the hardware result is undefined there", ActivationRangeWarning, stacklevel=4)


def _erf(x):
    # Abramowitz & Stegun 7.1.26; error below 1.5e-7, well inside fp32 engine precision.
    x = np.asarray(x, dtype=np.float64)
    t = 1.0 / (1.0 + 0.3275911 * np.abs(x))
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-x * x))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _gelu(x):
    return 0.5 * x * (1.0 + _erf(x / np.sqrt(2.0)))


def _gelu_dx(x):
    return 0.5 * (1.0 + _erf(x / np.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)


def _gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))


def _gelu_sigmoid_dx(x):
    s = _sigmoid(1.702 * x)
    return s + 1.702 * x * s * (1.0 - s)


def _silu_dx(x):
    s = _sigmoid(x)
    return s * (1.0 + x * (1.0 - s))


def _softplus(x):
    return np.logaddexp(0.0, x)


_FUNCTIONS = {
    "copy": lambda x: x,
    "square": np.square,
    "sigmoid": _sigmoid,
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": _gelu,
    "gelu_dx": _gelu_dx,
    "gelu_apprx_tanh": _gelu_tanh,
    "gelu_apprx_sigmoid": lambda x: x * _sigmoid(1.702 * x),
    "gelu_apprx_sigmoid_dx": _gelu_sigmoid_dx,
    "silu": lambda x: x * _sigmoid(x),
    "silu_dx": _silu_dx,
    "tanh": np.tanh,
    "softplus": _softplus,
    "mish": lambda x: x * np.tanh(_softplus(x)),
    "erf": _erf,
    "erf_dx": lambda x: 2.0 / np.sqrt(np.pi) * np.exp(-x * x),
    "exp": np.exp,
    "log": np.log,
    "sin": np.sin,
    "cos": np.cos,
    "tan": np.tan,
    "arctan": np.arctan,
    "sqrt": np.sqrt,
    "rsqrt": lambda x: 1.0 / np.sqrt(x),
    "reciprocal": lambda x: 1.0 / x,
    "sign": np.sign,
    "abs": np.abs,
}

# Documented valid input ranges of the ScalarE approximations: (low, high, applies to |x|).
VALID_RANGES = {
    "log": (2.0 ** -64, 2.0 ** 64, False),
    "sin": (-math.pi, math.pi, False),
    "arctan": (-math.pi / 2, math.pi / 2, False),
    "sqrt": (2.0 ** -116, 2.0 ** 118, False),
    "rsqrt": (2.0 ** -87, 2.0 ** 97, False),
    "reciprocal": (2.0 ** -42, 2.0 ** 42, True),
}

BY_NAME = {name: ActivationFunction(name, fn, VALID_RANGES.get(name)) for name, fn in _FUNCTIONS.items()}
