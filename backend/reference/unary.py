"""Unary element-wise ops, from ggml's documented semantics (computed in f32)."""
from __future__ import annotations

import math

import numpy as np

from . import f32, reference

_erf = np.vectorize(math.erf, otypes=[np.float64])
try:  # scipy is optional; math.erf through vectorize is the fallback
    from scipy.special import erf as _erf  # type: ignore
except ImportError:
    pass

SQRT_2_OVER_PI = 0.7978845608028654


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x * x)))


def gelu_erf(x):
    return (0.5 * x * (1.0 + _erf(x.astype(np.float64) / math.sqrt(2.0)))).astype(np.float32)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_quick(x):
    return x * sigmoid(1.702 * x)


def softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(x)))


def round_half_away(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


UNARY = {
    "ABS": np.abs,
    "SGN": np.sign,
    "NEG": np.negative,
    "STEP": lambda x: (x > 0).astype(np.float32),
    "TANH": np.tanh,
    "ELU": lambda x: np.where(x > 0, x, np.expm1(x)),
    "RELU": lambda x: np.maximum(x, 0),
    "SIGMOID": sigmoid,
    "GELU": gelu,
    "GELU_QUICK": gelu_quick,
    "SILU": silu,
    "HARDSWISH": lambda x: x * np.clip((x + 3.0) / 6.0, 0.0, 1.0),
    "HARDSIGMOID": lambda x: np.clip((x + 3.0) / 6.0, 0.0, 1.0),
    "EXP": np.exp,
    "EXPM1": np.expm1,
    "SOFTPLUS": softplus,
    "GELU_ERF": gelu_erf,
    "FLOOR": np.floor,
    "CEIL": np.ceil,
    "ROUND": round_half_away,
    "TRUNC": np.trunc,
}

for _name, _fn in UNARY.items():
    reference(f"UNARY:{_name}")(lambda node, a, _fn=_fn: _fn(f32(a)))
