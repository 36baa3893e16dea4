"""Element-wise aclnn operators of one tensor (ops-math / ops-nn: abs, neg, sign, exp,
tanh, relu, sigmoid (and in place), silu, gelu, gelu_v2, fast_gelu, hardsigmoid, hardswish, elu, gt_scalar,
softplus). Per operator: the dtypes the docs list for Atlas A2/A3 (the simulated
Ascend910B1), the dtype relation between self and out, and the formula."""
from __future__ import annotations

import math

import numpy as np

from . import dtypes
from .aclnn import (Plan, as_compute, in_type, invalid, need_cast, need_dims, need_dtype,
                    need_same_dtype, need_same_shape, operator, scalar, tensor, unary_type)

F = {"f32", "f16", "bf16"}
# erf at f32 arguments, its value rounded to f32: NumPy has no f32 erf, and the kernels'
# polynomial is within a few f32 ulps of it (the only float64 here: a function value)
erf_f32 = np.vectorize(lambda t: np.float32(math.erf(t)), otypes=[np.float32])


def _unary(self_p, out_p, self_types, out_types, relation, fn, out_name="out", hi=8):
    """The common shape of these operators' checks. relation: "same" (out dtype must
    equal self's), "cast" (self must convert to out) or "promote" (the two must have a
    promoted type, which out must hold)."""
    x, y = tensor(self_p, "self"), tensor(out_p, out_name)
    need_dtype(x, "self", self_types)
    need_dtype(y, out_name, out_types)
    if relation == "same":
        need_same_dtype(x, y, "self", out_name)
    elif relation == "cast":
        need_cast(x.dtype, y.dtype, f"self -> {out_name}")
    elif dtypes.promote(x.dtype, y.dtype) is None:
        raise invalid(f"self dtype {dtypes.name(x.dtype)} and {out_name} dtype "
                      f"{dtypes.name(y.dtype)} cannot be promoted")
    need_same_shape(x, y, "self", out_name)
    need_dims((x, "self"), (y, out_name), hi=hi)
    work = unary_type(x.dtype, y.dtype)
    return Plan(in_type(work, lambda a: fn(as_compute(a, work))), [x], [y])


ABS_TYPES = {"f32", "f16", "f64", "bf16", "s8", "s16", "s32", "s64", "u8", "bool"}


@operator("Abs")
def abs_(self, out):
    x = tensor(self, "self")
    if dtypes.short(x.dtype) != "c64":
        return _unary(self, out, ABS_TYPES, ABS_TYPES, "same", np.abs)
    y = tensor(out, "out")   # COMPLEX64 (on A2 / A3): its modulus, into a FLOAT out
    need_dtype(y, "out", {"f32"})
    need_same_shape(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"))
    return Plan(np.abs, [x], [y])


@operator("Neg")
def neg(self, out):
    types = {"s8", "s32", "s64", "f16", "bf16", "f32", "f64", "c64", "c128"}
    return _unary(self, out, types, types, "cast", np.negative)


@operator("Sign")
def sign(self, result):
    types = {"f64", "f32", "f16", "s32", "s64", "c64", "c128", "bool", "bf16"}
    return _unary(self, result, types, types, "same", np.sign, out_name="result", hi=8)


@operator("Exp")
def exp(self, out):
    x = tensor(self, "self")
    if dtypes.short(x.dtype) in ("bool", "s64") and dtypes.short(tensor(out, "out").dtype) not in dtypes.FLOATS:
        raise invalid("out must be a float type when self is BOOL or INT64")
    return _unary(self, out, {"f32", "f16", "f64", "c64", "c128", "bool", "s64", "bf16"},
                  {"f32", "f16", "f64", "c64", "c128", "bf16"}, "cast", np.exp)


@operator("Tanh")
def tanh(self, out):
    return _unary(self, out, {"f32", "f16", "bool", "u8", "s8", "s16", "s32", "s64", "bf16"},
                  F, "promote", np.tanh)


@operator("Relu")
def relu(self, out):
    types = {"f32", "f16", "s8", "s32", "s64", "bf16"}
    return _unary(self, out, types, types, "same", lambda v: np.maximum(v, 0))


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


@operator("Sigmoid")
def sigmoid(self, out):
    return _unary(self, out, F, F, "cast", _sigmoid)


@operator("InplaceSigmoid")
def inplace_sigmoid(self_ref):
    """selfRef = sigmoid(selfRef); its page's list is longer than Sigmoid's, 1-8 dims."""
    types = {"f32", "f16", "f64", "c64", "c128", "bf16"}
    return _unary(self_ref, self_ref, types, types, "same", _sigmoid, out_name="selfRef")


@operator("Silu")
def silu(self, out):
    return _unary(self, out, F, F, "same", lambda v: v / (1 + np.exp(-v)))


def _gelu_tanh(v):
    return 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3)))


def _gelu_erf(v):
    return 0.5 * v * (1 + erf_f32(v * np.float32(1 / math.sqrt(2))))


@operator("Gelu")
def gelu(self, out):   # the docs give the tanh form
    return _unary(self, out, F, F, "same", _gelu_tanh)


@operator("GeluV2")
def gelu_v2(x, approximate, y):
    if approximate not in (0, 1):
        raise invalid(f"approximate {approximate} should be 0 (none) or 1 (tanh)")
    return _unary(x, y, F, F, "same", _gelu_tanh if approximate else _gelu_erf, out_name="y")


@operator("FastGelu")
def fast_gelu(self, out):
    # the docs' x / (1 + exp(-1.702 x)) in the kernel's form, which neither overflows nor
    # cancels: x / (1 + exp(-1.702 |x|)) * exp(0.851 (x - |x|))
    return _unary(self, out, F, F, "same",
                  lambda v: v / (1 + np.exp(-1.702 * np.abs(v))) * np.exp(0.851 * (v - np.abs(v))))


@operator("Hardsigmoid")
def hardsigmoid(self, out):
    types = {"f32", "f16", "s32", "bf16"}
    return _unary(self, out, types, types, "same", lambda v: np.clip(v / 6 + 0.5, 0, 1))


@operator("Hardswish")
def hardswish(self, out):
    return _unary(self, out, F, F, "cast", lambda v: v * np.clip(v + 3, 0, 6) / 6)


def _float_scalar(p, what):
    s = scalar(p, what)
    need_cast(s.dtype, dtypes.BY_NAME["f32"], what)
    return float(s.value)


@operator("Elu")
def elu(self, alpha, scale, input_scale, out):
    a, s, i = (_float_scalar(alpha, "alpha"), _float_scalar(scale, "scale"),
               _float_scalar(input_scale, "inputScale"))
    return _unary(self, out, F, F, "cast",
                  lambda v: np.where(v > 0, s * v, a * s * np.expm1(v * i)))


@operator("GtScalar")
def gt_scalar(self, other, out):
    types = {"f64", "bf16", "f16", "f32", "s32", "u32", "s64", "u64", "s16", "u16", "s8", "u8", "bool"}
    x, y, o = tensor(self, "self"), tensor(out, "out"), scalar(other, "other")
    need_dtype(x, "self", types)
    need_dtype(y, "out", types | {"c64", "c128"})
    work = dtypes.promote_scalar(x.dtype, o.dtype)
    if work is None:
        raise invalid(f"self dtype {dtypes.name(x.dtype)} and other dtype "
                      f"{dtypes.name(o.dtype)} cannot be promoted")
    need_cast(dtypes.BY_NAME["bool"], y.dtype, "BOOL -> out")
    need_same_shape(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"))
    bound = as_compute(np.asarray(o.value), work)   # compared in the deduced type
    return Plan(lambda a: as_compute(a, work) > bound, [x], [y])


@operator("Softplus")
def softplus(self, beta, threshold, out):
    x = tensor(self, "self")
    b, t = scalar(beta, "beta"), scalar(threshold, "threshold")
    for s, what in ((b, "beta"), (t, "threshold")):   # the page's exceptions are CanCast's
        need_cast(s.dtype, x.dtype, f"{what} -> self")
    bv, tv = float(b.value), float(t.value)
    return _unary(self, out, F, F, "cast",
                  lambda v: np.where(v * bv > tv, v, np.log1p(np.exp(v * bv)) / bv))


@operator("InplaceExp")
def inplace_exp(self_ref):
    """selfRef = exp(selfRef); its page lists only floating and complex types."""
    types = {"f32", "f16", "f64", "c64", "c128", "bf16"}
    return _unary(self_ref, self_ref, types, types, "same", np.exp, out_name="selfRef")
