"""Normalisation aclnn operators (ops-nn layer_norm / rms_norm / lp_norm / group_norm, and
ops-math clamp_min), per their public docs for Atlas A2 / A3:

  LayerNorm  input [A.., R..] (non-contiguous allowed), normalizedShape = the trailing R
             dims (1..ndim long, matching right-aligned), weight / bias nullptr or of shape
             R, out like input, mean / rstd nullptr or [A.., 1..]; out = (x - E x) /
             sqrt(Var x + eps) * w + b with the population variance.
  RmsNorm    x 1-8 dims, *contiguous* ("不支持输入非连续"), gamma = x.shape[n:], yOut like
             x, rstdOut FLOAT of x.shape[:n]; dtype rows of the docs' table.
  AddRmsNorm x = x1 + x2, then RmsNorm of x with gamma: x1, x2, gamma, yOut, xOut of
             one type (FLOAT32 / FLOAT16 / BFLOAT16), x2 / yOut / xOut of x1's shape, 1-8
             dims, epsilon >= 0. The A2 table's rows: gamma = x1's trailing dims with
             rstdOut (FLOAT32, x1's shape with those dims 1) and xOut both given, or for
             FLOAT16 / BFLOAT16 only, gamma [1, x1's last dim] with rstdOut nullptr (xOut
             given or not); rstdOut without xOut is ACLNN_ERR_PARAM_NULLPTR. The kernel
             (add_rms_norm.h) rounds the sum to x1's type and norms that, in f32.
  Norm       self FLOAT / FLOAT16 / BFLOAT16, p in {0, 1, 2, 3, ±inf}, dims unique in
             [-N, N-1], out of the reduced shape (keepdim).
  ClampMin   out = max(self, min), out dtype = self's, same shape.
  GroupNorm  self 2-8 dims [N, C, *], gamma / beta nullptr or 1-D of C, every tensor of
             self's dtype, group > 0 dividing C, eps > 0, mean / rstd (N, group); the
             variance divides by n (the current page; an older English one said n - 1).

Precision: every one computes in f32 (half types cast up, as their kernels do), its sums
in the vector units' halving order (aclnn.sum_halving), 1 / n as an f32 factor.
"""
from __future__ import annotations

import math

import numpy as np

from .binding import lib

from . import dtypes
from .aclnn import (Plan, as_compute, int_array, invalid, need_cast, need_dims,
                    need_dtype, need_same_dtype, need_same_shape, operator, rounded, scalar,
                    sum_halving, tensor)
from .cost import per_element
from .refusals import SimError
from .state import warn

F = {"f32", "f16", "bf16"}
# aclnnGroupNorm's eps row: > 0, and at least 1e-5 for its precision (a caveat, not a check:
# op_api tests eps > 0 only); a smaller eps is taken with a warning (docs/cann-sim-caveats.md)
GROUP_NORM_PRECISE_EPS = 1e-5
TILING_ERROR = 561002   # ACLNN_ERR_INNER_TILING_ERROR: RmsNorm's "parameters not as described"


def _f32(a: np.ndarray) -> np.ndarray:
    """A norm kernel's operand: f16 / bf16 cast up to f32 (exact), f32 as is."""
    return np.asarray(a).astype(np.float32, copy=False)


def _tensor_shape(t, what, shape):
    if t.dims != tuple(shape):
        raise invalid(f"{what} shape {list(t.dims)} should be {list(shape)}")


@operator("LayerNorm", flops=per_element(8))
def layer_norm(input, normalized_shape, weight, bias, eps, out, mean_out, rstd_out):
    x, y = tensor(input, "input"), tensor(out, "out")
    shape = int_array(normalized_shape, "normalizedShape")
    w, b = tensor(weight, "weightOptional", optional=True), tensor(bias, "biasOptional", optional=True)
    mean, rstd = tensor(mean_out, "meanOutOptional", optional=True), tensor(rstd_out, "rstdOutOptional", optional=True)
    need_dims((x, "input"), (y, "out"), lo=1)
    for t, what in ((x, "input"), (y, "out"), (w, "weightOptional"), (b, "biasOptional"),
                    (mean, "meanOutOptional"), (rstd, "rstdOutOptional")):
        if t is not None:
            need_dtype(t, what, F)
    need_same_shape(x, y, "input", "out")
    for t, what in ((y, "out"), (mean, "meanOutOptional"), (rstd, "rstdOutOptional")):
        if t is not None:
            need_same_dtype(x, t, "input", what)
    j = len(shape)
    if not 1 <= j <= x.ndim:
        raise invalid(f"normalizedShape has {j} dims; it needs 1..{x.ndim} (input's dims)")
    if x.dims[x.ndim - j:] != tuple(shape):
        raise invalid(f"normalizedShape {list(shape)} does not match the trailing dims of input {list(x.dims)}")
    for t, what in ((w, "weightOptional"), (b, "biasOptional")):
        if t is not None:
            _tensor_shape(t, what, shape)
            if t.dtype != x.dtype and t.np_dtype != np.float32:
                raise invalid(f"{what} dtype should be input's or FLOAT")
    if w is not None and b is not None:
        need_same_dtype(w, b, "weightOptional", "biasOptional")
    stat_shape = x.dims[:x.ndim - j] + (1,) * j
    for t, what in ((mean, "meanOutOptional"), (rstd, "rstdOutOptional")):
        if t is not None:
            _tensor_shape(t, what, stat_shape)
    axes = tuple(range(x.ndim - j, x.ndim))
    inputs = [x] + [t for t in (w, b) if t is not None]
    outputs = [y] + [t for t in (mean, rstd) if t is not None]

    inv_n = np.float32(1 / math.prod(shape)) if math.prod(shape) else np.float32(np.nan)

    def compute(xa, *wb):   # in f32, as layer_norm_v4's kernels (half types cast first)
        v = _f32(xa)
        mu = sum_halving(v, axes, keepdims=True) * inv_n
        d = v - mu
        r = np.float32(1) / np.sqrt(sum_halving(d * d, axes, keepdims=True) * inv_n + np.float32(eps))
        res = d * r
        wb = list(wb)
        if w is not None:
            res = res * _f32(wb.pop(0))
        if b is not None:
            res = res + _f32(wb.pop(0))
        return (res,) + tuple(s for s, t in ((mu, mean), (r, rstd)) if t is not None)
    return Plan(compute, inputs, outputs)


# RmsNorm (x, gamma) dtype pairs of the docs' table for A2 / A3 (y has x's dtype)
_RMS_PAIRS = {("f16", "f32"), ("bf16", "f32"), ("f16", "f16"), ("bf16", "bf16"), ("f32", "f32")}


@operator("RmsNorm", flops=per_element(4))
def rms_norm(x_p, gamma_p, epsilon, y_p, rstd_p):
    x, g, y, rstd = tensor(x_p, "x"), tensor(gamma_p, "gamma"), tensor(y_p, "yOut"), tensor(rstd_p, "rstdOut")
    for t, what in ((x, "x"), (g, "gamma"), (y, "yOut")):
        need_dtype(t, what, F)
    need_dtype(rstd, "rstdOut", {"f32"})
    need_same_dtype(x, y, "x", "yOut")
    if (dtypes.short(x.dtype), dtypes.short(g.dtype)) not in _RMS_PAIRS:
        raise invalid(f"x dtype {dtypes.name(x.dtype)} with gamma dtype {dtypes.name(g.dtype)} "
                      "is not a supported combination")
    # x, gamma and yOut may be non-contiguous (the page's 非连续Tensor column: √)
    need_dims((x, "x"), (g, "gamma"), (y, "yOut"), (rstd, "rstdOut"), lo=1)
    n = x.ndim - g.ndim
    if n < 0 or x.dims[n:] != g.dims:
        raise SimError(TILING_ERROR, f"gamma shape {list(g.dims)} should be x's trailing dims {list(x.dims)}")
    if y.dims != x.dims:
        raise SimError(TILING_ERROR, f"yOut shape {list(y.dims)} should be x's {list(x.dims)}")
    if rstd.dims != x.dims[:n] and not (n == 0 and rstd.dims == (1,)):
        raise SimError(TILING_ERROR, f"rstdOut shape {list(rstd.dims)} should be x's leading dims {list(x.dims[:n])}")
    axes = tuple(range(n, x.ndim))

    inv_n = np.float32(1 / math.prod(g.dims)) if math.prod(g.dims) else np.float32(np.nan)

    def compute(xa, ga):   # rms_norm.h: x² summed in f32 halves, rstd, y = x * rstd * gamma in f32
        v = _f32(xa)
        r = np.float32(1) / np.sqrt(sum_halving(v * v, axes, keepdims=True) * inv_n + np.float32(epsilon))
        return v * r * _f32(ga), r.reshape(rstd.dims)
    return Plan(compute, [x, g], [y, rstd])


@operator("Norm", flops=per_element(2))
def norm(self, p_scalar, dim, keepdim, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    p = scalar(p_scalar, "pScalar")
    dims = int_array(dim, "dim")
    if dtypes.short(p.dtype) != "f32":
        raise invalid(f"pScalar dtype {dtypes.name(p.dtype)} should be FLOAT")
    need_dtype(x, "self", F)
    need_dtype(y, "out", F)
    need_dims((x, "self"), (y, "out"), lo=0)
    p = float(p.value)
    if p not in (0.0, 1.0, 2.0, 3.0) and not math.isinf(p):
        raise invalid(f"pScalar {p} is not one of 0, 1, 2, 3, inf, -inf")
    n = max(x.ndim, 1)
    if any(not -n <= d < n for d in dims):
        raise invalid(f"dim {list(dims)} out of range [{-n}, {n - 1}]")
    axes = tuple(sorted(d % n for d in dims)) if dims else tuple(range(x.ndim))
    if len(set(axes)) != len(axes):
        raise invalid(f"dim {list(dims)} has repeated values")
    shape = tuple(1 if i in axes else s for i, s in enumerate(x.dims)) if keepdim else \
        tuple(s for i, s in enumerate(x.dims) if i not in axes)
    if y.dims != shape:
        raise invalid(f"out shape {list(y.dims)} should be {list(shape)}")

    def compute(a):   # in f32 (lp_norm_v2 casts half types up)
        v = np.abs(_f32(a))
        if p == 0.0:
            r = (v != 0).sum(axis=axes, keepdims=keepdim).astype(np.float32)
        elif math.isinf(p):
            r = v.max(axis=axes, keepdims=keepdim) if p > 0 else v.min(axis=axes, keepdims=keepdim)
        else:
            r = (v ** np.float32(p)).sum(axis=axes, keepdims=keepdim) ** np.float32(1.0 / p)
        return r
    return Plan(compute, [x], [y])


@operator("ClampMin")
def clamp_min(self, clip_value_min, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    lo = scalar(clip_value_min, "clipValueMin")
    types = {"f16", "f32", "f64", "s8", "u8", "s16", "s32", "s64", "bf16"}
    need_dtype(x, "self", types)
    need_dtype(y, "out", types)
    if dtypes.short(lo.dtype) not in types | {"bool"}:
        raise invalid(f"clipValueMin dtype {dtypes.name(lo.dtype)} is not supported")
    need_cast(x.dtype, y.dtype, "self -> out")
    need_cast(lo.dtype, y.dtype, "clipValueMin -> out")
    need_same_shape(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"), lo=1)
    bound = dtypes.convert(np.asarray(lo.value), y.dtype).astype(dtypes.compute_dtype(y.dtype))
    return Plan(lambda a: np.maximum(as_compute(a, y.dtype), bound), [x], [y])


@operator("GroupNorm", flops=per_element(8))
def group_norm(self, gamma, beta, n, c, hxw, group, eps, out, mean_out, rstd_out):
    x, y = tensor(self, "self"), tensor(out, "out")
    g, b = tensor(gamma, "gamma", optional=True), tensor(beta, "beta", optional=True)
    mean, rstd = tensor(mean_out, "meanOut"), tensor(rstd_out, "rstdOut")
    need_dtype(x, "self", F)
    for t, what in ((g, "gamma"), (b, "beta"), (y, "out"), (mean, "meanOut"), (rstd, "rstdOut")):
        if t is not None:
            need_dtype(t, what, F)
            need_same_dtype(x, t, "self", what)
    need_dims((x, "self"), lo=2, hi=8)
    if group <= 0:
        raise invalid(f"group {group} should be > 0")
    if c % group:
        raise invalid(f"C {c} is not divisible by group {group}")
    if not eps > 0:
        raise invalid(f"eps {eps} should be > 0")
    if eps < GROUP_NORM_PRECISE_EPS:
        warn(f"aclnnGroupNorm: eps {eps:g} is below {GROUP_NORM_PRECISE_EPS:g}, where the page stops "
             "promising its precision (computed as above it)")
    need_same_shape(x, y, "self", "out")
    if x.format != y.format:
        raise invalid("self and out formats differ")
    if x.dims[0] != n or x.dims[1] != c:
        raise invalid(f"self shape {list(x.dims)} does not start with N {n}, C {c}")
    if math.prod(x.dims[2:]) != hxw:
        raise invalid(f"self's dims after N, C multiply to {math.prod(x.dims[2:])}, not HxW {hxw}")
    for t, what in ((mean, "meanOut"), (rstd, "rstdOut")):
        _tensor_shape(t, what, (n, group))
    for t, what in ((g, "gamma"), (b, "beta")):
        if t is not None and t.dims != (c,):
            raise invalid(f"{what} shape {list(t.dims)} should be [{c}]")
    inputs = [x] + [t for t in (g, b) if t is not None]

    inv_n = np.float32(1 / (c // group * hxw)) if c // group * hxw else np.float32(np.nan)

    def compute(xa, *gb):   # in f32, as group_norm's kernels (half types cast first)
        v = _f32(xa).reshape(n, group, -1)
        mu = sum_halving(v, (2,), keepdims=True) * inv_n
        d = v - mu
        r = np.float32(1) / np.sqrt(sum_halving(d * d, (2,), keepdims=True) * inv_n + np.float32(eps))
        res = (d * r).reshape((n, c, -1))
        gb = list(gb)
        if g is not None:
            res = res * _f32(gb.pop(0)).reshape(1, c, 1)
        if b is not None:
            res = res + _f32(gb.pop(0)).reshape(1, c, 1)
        return res.reshape(x.dims), mu.reshape(n, group), r.reshape(n, group)
    return Plan(compute, inputs, [y, mean, rstd])


@operator("AddRmsNorm", flops=per_element(5))
def add_rms_norm(x1_p, x2_p, gamma_p, epsilon, y_p, rstd_p, x_p):
    x1, x2, g, y = tensor(x1_p, "x1"), tensor(x2_p, "x2"), tensor(gamma_p, "gamma"), tensor(y_p, "yOut")
    rstd, xo = tensor(rstd_p, "rstdOut", optional=True), tensor(x_p, "xOut", optional=True)
    if rstd is not None and xo is None:
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, "xOut is nullptr while rstdOut is not")
    named = [(t, what) for t, what in ((x1, "x1"), (x2, "x2"), (g, "gamma"), (y, "yOut"), (xo, "xOut"))
             if t is not None]
    for t, what in named:
        need_dtype(t, what, F)
        need_same_dtype(x1, t, "x1", what)
    need_dims(*named, lo=1)
    for t, what in named:
        if t is not g:
            need_same_shape(x1, t, "x1", what)
    if not epsilon >= 0:
        raise invalid(f"epsilon {epsilon} should be >= 0")
    if rstd is None:
        if dtypes.short(x1.dtype) == "f32":
            raise invalid("rstdOut is required for FLOAT32 inputs")
        _tensor_shape(g, "gamma (rstdOut nullptr)", (1, x1.dims[-1]))
        axes = (x1.ndim - 1,)
    else:
        need_dtype(rstd, "rstdOut", {"f32"})
        n = x1.ndim - g.ndim
        if n < 0 or x1.dims[n:] != g.dims:
            raise invalid(f"gamma shape {list(g.dims)} should be x1's trailing dims {list(x1.dims)}")
        _tensor_shape(rstd, "rstdOut", x1.dims[:n] + (1,) * g.ndim)
        axes = tuple(range(n, x1.ndim))
    outputs = [y] + [t for t in (rstd, xo) if t is not None]
    eps = np.float32(epsilon)
    inv_n = np.float32(1 / math.prod(x1.dims[a] for a in axes)) if math.prod(x1.dims[a] for a in axes) \
        else np.float32(np.nan)

    t = x1.dtype

    def compute(a, b, ga):
        # add_rms_norm.h: x = x1 + x2 rounded to x1's type, normed from there in f32
        # (x² / n summed); a half type's x * rstd is rounded to it before gamma's product
        x = _f32(rounded(_f32(a) + _f32(b), t))
        r = np.float32(1) / np.sqrt(sum_halving(x * x * inv_n, axes, keepdims=True) + eps)
        res = _f32(rounded(x * r, t)) * _f32(ga).reshape(x.shape[x.ndim - len(axes):])
        return (res,) + ((r,) if rstd is not None else ()) + ((x,) if xo is not None else ())
    return Plan(compute, [x1, x2, g], outputs)
