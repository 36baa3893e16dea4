"""Unary element-wise ops, from ggml's documented semantics (computed in f32)."""
from __future__ import annotations

import math

import numpy as np

from . import f32, reference


def erf(x):
    """erf in float64, vectorised: 2/sqrt(pi) * exp(-x^2) * sum_n (2x^2)^n x / (1*3*..*(2n+1)).
    All terms are positive (no cancellation); |x| >= 6 is +-1 to double precision."""
    x = np.clip(np.asarray(x, dtype=np.float64), -6.0, 6.0)
    x2 = x * x
    term = x.copy()
    total = x.copy()
    n = 0
    while np.any(np.abs(term) > 1e-17 * np.abs(total)):
        n += 1
        term *= 2.0 * x2 / (2 * n + 1)
        total += term
    return 2.0 / math.sqrt(math.pi) * np.exp(-x2) * total


SQRT_2_OVER_PI = 0.7978845608028654


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(SQRT_2_OVER_PI * x * (1.0 + 0.044715 * x * x)))


def gelu_erf(x):
    return (0.5 * x * (1.0 + erf(x.astype(np.float64) / math.sqrt(2.0)))).astype(np.float32)


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def silu(x):
    return x / (1.0 + np.exp(-x))


def gelu_quick(x):
    return x * sigmoid(1.702 * x)


def softplus(x):
    return np.where(x > 20.0, x, np.log1p(np.exp(x)))


def round_half_away(x):
    """roundf: halfway cases away from zero. x - trunc(x) is exact, unlike x + 0.5, which
    rounds up 0.49999997 and odd integers above 2^23."""
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def xielu(x, alpha_n, alpha_p, beta, eps):
    """xIELU with ggml's stored parameters: alpha_n already holds beta + softplus(alpha_n)."""
    neg = (np.expm1(np.minimum(x, eps)) - x) * alpha_n + beta * x
    return np.where(x > 0, alpha_p * x * x + beta * x, neg)


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


@reference("UNARY:XIELU")
def _xielu(node, a):
    alpha_n, alpha_p, beta, eps = (np.float32(node.param_f32(i)) for i in range(1, 5))
    return xielu(f32(a), alpha_n, alpha_p, beta, eps)
