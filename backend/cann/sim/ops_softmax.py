"""aclnnSoftmax and aclnnLogSoftmax (ops-nn softmax_v2, log_softmax_v2), aclnnPowScalarTensor and aclnnInplacePowTensorTensor
(ops-math pow), per their
public docs for Atlas A2 / A3:

  Softmax          self / out FLOAT, FLOAT16, DOUBLE or BFLOAT16, same shape, at most 8
                   dims, dim in [-n, n-1] (n = max(ndim, 1)); non-contiguous self is made
                   contiguous internally; the result is cast to out's type.
  LogSoftmax       the same types (FLOAT16, FLOAT32, DOUBLE, BFLOAT16) and rules, 1 to 8
                   dims (its page; an empty self is taken), out of self's shape in a type
                   self converts to; x − max − log Σ exp(x − max) (the page's stable form).
  PowScalarTensor  out = self ** exponent, self an aclScalar, exponent a tensor (≤ 8 dims):
                   their types follow the tensor-scalar deduction, the deduced type must
                   convert to out's, out has exponent's shape; BFLOAT16 is taken on A2/A3
                   (not on the training / inference series), out may also be UINT16/32/64.
  InplacePowTensorTensor  self = self ** exponent, two tensors of the page's list whose
                   deduced type converts to self's, exponent broadcasting to self's shape.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .aclnn import (Plan, as_compute, broadcast, in_type, invalid, need_cast, need_dims, need_dtype,
                    need_same_shape, operator, promote, scalar, tensor)
from .cost import per_element


SOFTMAX_TYPES = {"f32", "f16", "f64", "bf16"}   # both pages (aclnnSoftmax, aclnnLogSoftmax)


def _float_self_out(self, out):
    """self and out, each of the float types the softmax pages list."""
    x, y = tensor(self, "self"), tensor(out, "out")
    need_dtype(x, "self", SOFTMAX_TYPES)
    need_dtype(y, "out", SOFTMAX_TYPES)
    return x, y


@operator("Softmax", flops=per_element(5))
def softmax(self, dim, out):
    x, y = _float_self_out(self, out)
    n = max(x.ndim, 1)
    if not -n <= dim < n:
        raise invalid(f"provided dim {dim} not in the range of input size {n}")
    need_dims((x, "self"), hi=8)
    need_same_shape(x, y, "self", "out")
    axis = dim % n if x.ndim else None

    def compute(a):   # in self's compute type: f32 for the half types (f64 only for DOUBLE)
        v = as_compute(a, x.dtype)
        if axis is None:
            return np.ones_like(v)
        e = np.exp(v - v.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)
    return Plan(compute, [x], [y])


@operator("LogSoftmax", flops=per_element(5))
def log_softmax(self, dim, out):
    x, y = _float_self_out(self, out)
    need_dims((x, "self"), (y, "out"), lo=1, hi=8)
    if not -x.ndim <= dim < x.ndim:
        raise invalid(f"provided dim {dim} not in the range of input size {x.ndim}")
    need_cast(x.dtype, y.dtype, "self -> out")
    need_same_shape(x, y, "self", "out")
    axis = dim % x.ndim

    def compute(a):   # in self's compute type (f32 for the half types), rounded to self's
        v = as_compute(a, x.dtype)
        if v.size == 0:
            return v
        shifted = v - v.max(axis=axis, keepdims=True)
        return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))
    return Plan(in_type(x.dtype, compute), [x], [y])


POW_TYPES = {"f32", "f16", "f64", "bf16", "s16", "s32", "s64", "s8", "u8", "c64", "c128"}
POW_OUT_TYPES = POW_TYPES | {"u16", "u32", "u64"}


@operator("PowScalarTensor")
def pow_scalar_tensor(self, exponent, out):
    s = scalar(self, "self")
    e, y = tensor(exponent, "exponent"), tensor(out, "out")
    need_dtype(e, "exponent", POW_TYPES)
    if dtypes.short(s.dtype) not in POW_TYPES:
        raise invalid(f"self dtype {dtypes.name(s.dtype)} is not supported")
    need_dtype(y, "out", POW_OUT_TYPES)
    need_dims((e, "exponent"), (y, "out"), hi=8)
    work = dtypes.promote_scalar(e.dtype, s.dtype)
    if work is None:
        raise invalid(f"self dtype {dtypes.name(s.dtype)} and exponent dtype "
                      f"{dtypes.name(e.dtype)} cannot be deduced")
    need_cast(work, y.dtype, "deduced type -> out")
    need_same_shape(e, y, "exponent", "out")
    base = dtypes.convert(np.asarray(s.value), work).astype(dtypes.compute_dtype(work))
    return Plan(in_type(work, lambda a: np.power(base, as_compute(a, work))), [e], [y])


def _power(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a ** b; for integers a negative exponent gives the truncated 1 / a ** |b| (its
    page says nothing of it): 1 for a == 1, +-1 for a == -1, else 0."""
    if a.dtype.kind not in "iu":
        return np.power(a, b)
    neg = b < 0
    r = np.power(a, np.where(neg, 0, b).astype(a.dtype))
    small = np.where(a == 1, 1, np.where(a == -1, np.where(b % 2 == 0, 1, -1), 0))
    return np.where(neg, small, r).astype(a.dtype)


@operator("InplacePowTensorTensor")
def inplace_pow_tensor_tensor(self, exponent):
    """self = self ** exponent (ops-math pow): both of the page's list, with a deduced type
    that converts to self's; exponent broadcasts to self's shape; at most 8 dims."""
    x, e = tensor(self, "self"), tensor(exponent, "exponent")
    need_dtype(x, "self", POW_TYPES)
    need_dtype(e, "exponent", POW_TYPES)
    need_dims((x, "self"), (e, "exponent"))
    work = promote(x.dtype, e.dtype, "self", "exponent")
    need_cast(work, x.dtype, "deduced type -> self")
    if broadcast(x.dims, e.dims, "self", "exponent") != x.dims:
        raise invalid(f"self {list(x.dims)} and exponent {list(e.dims)} broadcast to a shape "
                      "other than self's")
    return Plan(in_type(work, lambda a, b: _power(as_compute(a, work), as_compute(b, work))), [x, e], [x])
