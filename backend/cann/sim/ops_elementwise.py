"""Element-wise aclnn operators of ops-math / ops-nn: sqrt, log, sin, cos (self -> a
floating out), clamp (scalar bounds) and its in-place kin hardtanh, leaky_relu and its
in-place form, and the in-place add aclnnInplaceAdd.
Per operator: the dtypes the docs list for Atlas A2/A3 (the simulated Ascend910B1), the
relation between self's and out's dtypes, the shape rule, and the formula."""
from __future__ import annotations

import numpy as np

from .binding import ffi

from . import dtypes
from .aclnn import (Plan, as_compute, in_type, invalid, need_cast, need_dims, need_dtype,
                    need_same_shape, operator, scalar, tensor, unary_type)
from .ops_binary import binary_plan

# sqrt / log / sin / cos: integer and bool inputs compute in a floating out
MATH_IN = {"f32", "f16", "f64", "bf16", "s8", "s16", "s32", "s64", "u8", "bool", "c64", "c128"}
MATH_OUT = {"f32", "f16", "f64", "bf16", "c64", "c128"}


def _math(self_p, out_p, fn):
    x, y = tensor(self_p, "self"), tensor(out_p, "out")
    need_dtype(x, "self", MATH_IN)
    need_dtype(y, "out", MATH_OUT)
    need_cast(x.dtype, y.dtype, "self -> out")
    need_same_shape(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"))
    work = unary_type(x.dtype, y.dtype)   # op_api: self (FLOAT for integers), then cast to out
    return Plan(in_type(work, lambda a: fn(as_compute(a, work))), [x], [y])


@operator("Sqrt")
def sqrt(self, out):
    return _math(self, out, np.sqrt)   # negative inputs give NaN, as documented


@operator("Log")
def log(self, out):
    return _math(self, out, np.log)


@operator("Sin")
def sin(self, out):
    return _math(self, out, np.sin)


@operator("Cos")
def cos(self, out):
    return _math(self, out, np.cos)


CLAMP_TYPES = {"f32", "f16", "f64", "bf16", "s8", "s16", "s32", "s64", "u8"}


def _bound(value, work: int):
    """A scalar bound converted to the type the operator computes in."""
    return dtypes.convert(np.asarray(value), work).astype(dtypes.compute_dtype(work))


@operator("Clamp")
def clamp(self, clip_min, clip_max, out):
    """out = max(min(self, max), min); either bound may be nullptr, not both. Each bound
    converts to self's type (the page), self to out's, where A2 / A3 compute."""
    x, y = tensor(self, "self"), tensor(out, "out")
    need_dtype(x, "self", CLAMP_TYPES)
    need_dtype(y, "out", CLAMP_TYPES)
    if clip_min == ffi.NULL and clip_max == ffi.NULL:
        raise invalid("clipValueMin and clipValueMax are both nullptr")
    bounds = []
    for p, what in ((clip_min, "clipValueMin"), (clip_max, "clipValueMax")):
        if p == ffi.NULL:
            bounds.append(None)
            continue
        s = scalar(p, what)
        need_cast(s.dtype, x.dtype, f"{what} -> self")
        bounds.append(s.value)
    need_cast(x.dtype, y.dtype, "self -> out")
    work = y.dtype
    need_same_shape(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"))
    lo, hi = (None if b is None else _bound(b, work) for b in bounds)

    def compute(a):
        v = as_compute(a, work)
        if hi is not None:
            v = np.minimum(v, hi)
        if lo is not None:
            v = np.maximum(v, lo)
        return v
    return Plan(compute, [x], [y])


@operator("InplaceHardtanh")
def inplace_hardtanh(self_ref, clip_min, clip_max):
    """selfRef = clipValueMax above it, clipValueMin below it, else itself: a clamp in
    place (aclnn has no aclnnInplaceClamp). Both bounds are required, each converts to
    selfRef's type, where it computes; a min above the max is refused (the page's return
    codes)."""
    x = tensor(self_ref, "selfRef")
    need_dtype(x, "selfRef", CLAMP_TYPES)
    need_dims((x, "selfRef"))   # the page says 1-8 dims, as Clamp's, whose op_api takes 0
    lo_s, hi_s = scalar(clip_min, "clipValueMin"), scalar(clip_max, "clipValueMax")
    for s, what in ((lo_s, "clipValueMin"), (hi_s, "clipValueMax")):
        need_cast(s.dtype, x.dtype, f"{what} -> selfRef")
    if lo_s.value > hi_s.value:
        raise invalid(f"clipValueMin {lo_s.value} is greater than clipValueMax {hi_s.value}")
    lo, hi = _bound(lo_s.value, x.dtype), _bound(hi_s.value, x.dtype)
    return Plan(lambda a: np.minimum(np.maximum(as_compute(a, x.dtype), lo), hi), [x], [x])


def _leaky_plan(x, y, negative_slope, x_name: str):
    s = scalar(negative_slope, "negativeSlope")
    need_cast(s.dtype, x.dtype, f"negativeSlope -> {x_name}")
    k = float(s.value)
    return Plan(in_type(x.dtype, lambda a: (lambda v: np.where(v > 0, v, v * k))(as_compute(a, x.dtype))),
                [x], [y])


@operator("LeakyRelu")
def leaky_relu(self, negative_slope, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    types = {"f32", "f16", "bf16"}   # DOUBLE only on the training series
    need_dtype(x, "self", types)
    need_dtype(y, "out", types)
    need_cast(x.dtype, y.dtype, "self -> out")
    need_same_shape(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"))
    return _leaky_plan(x, y, negative_slope, "self")


@operator("InplaceLeakyRelu")
def inplace_leaky_relu(self_ref, negative_slope):
    """selfRef = leaky_relu(selfRef); its page lists DOUBLE for A2 too (LeakyRelu's does not)."""
    x = tensor(self_ref, "selfRef")
    need_dtype(x, "selfRef", {"f32", "f16", "bf16", "f64"})
    need_dims((x, "selfRef"))
    return _leaky_plan(x, x, negative_slope, "selfRef")


@operator("InplaceAdd")
def inplace_add(self_ref, other, alpha):
    """selfRef += alpha * other; other broadcasts to selfRef's shape."""
    return binary_plan(self_ref, other, self_ref, lambda a, b, k: a + k * b if k != 1 else a + b, alpha)


def _inplace_math(ref_p, what: str, types: set[str], fn):
    """An in-place element-wise operator: the ref's dtype in its page's list, at most 8 dims."""
    x = tensor(ref_p, what)
    need_dtype(x, what, types)
    need_dims((x, what))
    return Plan(lambda a: fn(as_compute(a, x.dtype)), [x], [x])


@operator("InplaceSin")
def inplace_sin(self_ref):   # its page: FLOAT, BFLOAT16, FLOAT16 only (Sin's list is longer)
    return _inplace_math(self_ref, "selfRef", {"f32", "f16", "bf16"}, np.sin)


@operator("InplaceCos")
def inplace_cos(input_ref):
    return _inplace_math(input_ref, "inputRef", {"f32", "f16", "f64", "c64", "c128", "bf16"}, np.cos)
