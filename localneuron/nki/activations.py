"""Activation functions: the `op=` of nisa.activation, and the nl unary math functions.

The Scalar engine evaluates them in fp32 (the hardware uses piece-wise polynomials; exact
numpy functions stand in for them here).
"""
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, eq=False)
class ActivationFunction:
    name: str
    fn: object

    def __call__(self, x, dtype=None):
        from .language.elementwise import unary
        return unary(self, x, dtype)

    def __repr__(self):
        return f"nl.{self.name}"

    def apply(self, x):
        with np.errstate(all="ignore"):
            return self.fn(np.asarray(x, dtype=np.float32)).astype(np.float32)


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

BY_NAME = {name: ActivationFunction(name, fn) for name, fn in _FUNCTIONS.items()}
