"""Gated-activation aclnn operators (ops-nn swi_glu, geglu_v3) and aclnnInplaceMul.

aclnnSwiGlu: x FLOAT / FLOAT16 / BFLOAT16, at least 1 dim, even along `dim`; out of x's
dtype and of x's shape halved along `dim`; neither may be non-contiguous nor empty.
out = silu(A) * B, A and B the first and second halves of x along dim.

aclnnGeGluV3: self FLOAT / FLOAT16 / BFLOAT16, 1-8 dims, even along `dim`; approximate
0 (none: the erf form) or 1 (tanh); out and outGelu of self's dtype and of self's shape
halved along dim. activateLeft true: out = gelu(A) * B, false: out = A * gelu(B);
outGelu holds the gelu of the activated half.

aclnnInplaceMul: selfRef *= other, other broadcasting to selfRef's shape, the promoted
type converting to selfRef's.
"""
from __future__ import annotations

import math

import numpy as np

from .aclnn import (Plan, as_compute, invalid, need_contiguous, need_dims,
                    need_dtype, need_same_dtype, operator, tensor)
from .ops_binary import binary_plan
from .ops_unary import erf_f32

F = {"f32", "f16", "bf16"}


def _axis(dim: int, ndim: int, what: str = "dim") -> int:
    if not -ndim <= dim < ndim:
        raise invalid(f"{what} {dim} is out of range [{-ndim}, {ndim - 1}]")
    return dim % ndim


def _halved(x, dim: int, what: str) -> tuple[int, tuple[int, ...]]:
    d = _axis(dim, x.ndim)
    if x.dims[d] % 2:
        raise invalid(f"{what} size {x.dims[d]} along dim {dim} is not even")
    return d, x.dims[:d] + (x.dims[d] // 2,) + x.dims[d + 1:]


def _halves(a, d):
    n = a.shape[d] // 2
    return np.take(a, range(n), axis=d), np.take(a, range(n, 2 * n), axis=d)


@operator("SwiGlu")
def swi_glu(x_p, dim, out_p):
    x, y = tensor(x_p, "x"), tensor(out_p, "out")
    need_dtype(x, "x", F)
    need_same_dtype(x, y, "x", "out")
    need_dims((x, "x"), (y, "out"), lo=1)
    need_contiguous(x, "x")
    need_contiguous(y, "out")
    if 0 in x.dims:
        raise invalid("x is an empty tensor")
    d, shape = _halved(x, dim, "x")
    if y.dims != shape:
        raise invalid(f"out shape {list(y.dims)} should be {list(shape)}")

    def compute(a):
        lo, hi = _halves(as_compute(a, x.dtype), d)
        return lo / (1 + np.exp(-lo)) * hi
    return Plan(compute, [x], [y])


def _gelu(v, approximate):
    if approximate:
        return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))
    return 0.5 * v * (1 + erf_f32(v * np.float32(1 / math.sqrt(2))))


@operator("GeGluV3")
def geglu_v3(self, dim, approximate, activate_left, out, out_gelu):
    x, y, yg = tensor(self, "self"), tensor(out, "out"), tensor(out_gelu, "outGelu")
    need_dtype(x, "self", F)
    need_same_dtype(x, y, "self", "out")
    need_same_dtype(x, yg, "self", "outGelu")
    need_dims((x, "self"), (y, "out"), (yg, "outGelu"), lo=1)
    if approximate not in (0, 1):
        raise invalid(f"approximate {approximate} should be 0 (none) or 1 (tanh)")
    d, shape = _halved(x, dim, "self")
    for t, what in ((y, "out"), (yg, "outGelu")):
        if t.dims != shape:
            raise invalid(f"{what} shape {list(t.dims)} should be {list(shape)}")

    def compute(a):
        lo, hi = _halves(as_compute(a, x.dtype), d)
        act, other = (lo, hi) if activate_left else (hi, lo)
        g = _gelu(act, approximate)
        return g * other, g
    return Plan(compute, [x], [y, yg])


@operator("InplaceMul")
def inplace_mul(self_ref, other):
    """selfRef *= other; other broadcasts to selfRef's shape."""
    return binary_plan(self_ref, other, self_ref, lambda a, b, k: a * b)

