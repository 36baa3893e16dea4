"""Reductions, scans and sorts of ops-math: aclnnReduceSum, aclnnMean, aclnnArgMax,
aclnnEqTensor, aclnnCumsum, aclnnArgsort.

Docs' rules checked (Atlas A2/A3): the listed dtypes; reduce dims inside
[-self.dim(), self.dim() - 1] and not repeated; out of the reduced shape (a size-1 dim
kept with keepDim, dropped without); ReduceSum / Cumsum: out's dtype is the `dtype`
argument; Mean: self converts to `dtype`, which converts to out; ArgMax: out INT32 or
INT64; EqTensor: self and other promote and broadcast, out of the broadcast shape and
any type BOOL converts to; Argsort: out INT64 of self's shape; at most 8 dims; BF16 not
with a sort axis of size 1; equal keys in an order CANN_SIM_SEED fixes (the page promises
determinism, not stability).
Precision: self is cast to `dtype` first (op_api), float sums accumulate in dtype's
compute type (f32 for the half types, f64 only for DOUBLE) and are rounded to dtype;
integer sums are exact in int64, then wrap into dtype as the kernel's do.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .binding import lib
from .state import STATE, tolerate
from .aclnn import (Plan, as_compute, broadcast, in_type, int_array, invalid, need_cast, need_dims, need_dtype,
                    need_same_shape, operator, promote, tensor)

SUM_TYPES = {"f16", "f32", "s8", "s16", "s32", "s64", "u8", "bool", "f64", "c64", "c128", "bf16"}
MEAN_TYPES = {"f32", "f16", "bf16", "f64", "s32", "s64", "s16", "s8", "u8", "c64", "c128"}
ARGMAX_TYPES = {"f32", "f16", "bf16", "f64", "s8", "s16", "s32", "s64", "u8"}
EQ_TYPES = {"f16", "f32", "s64", "s32", "s8", "u8", "bool", "bf16", "f64", "s16", "c64", "c128"}
CUMSUM_TYPES = {"f32", "f16", "s32", "f64", "u8", "s8", "s16", "s64", "c64", "c128", "bf16"}
SORT_TYPES = {"bf16", "f16", "f32", "s8", "s16", "s32", "s64", "u8"}


def _axis(dim: int, ndim: int, what: str = "dim") -> int:
    if not -ndim <= dim < ndim:
        raise invalid(f"{what} {dim} is out of range [{-ndim}, {ndim - 1}]")
    return dim % ndim


def _axes(values, ndim: int, what: str) -> tuple[int, ...]:
    axes = tuple(_axis(v, max(ndim, 1), what) for v in values)
    if len(set(axes)) != len(axes):
        raise invalid(f"{what} {list(values)} names a dim twice")
    return axes


def _reduced(dims, axes, keep: bool) -> tuple[int, ...]:
    return tuple(1 if i in axes else n for i, n in enumerate(dims) if keep or i not in axes)


def _need_out_shape(y, shape, what="out"):
    if y.dims == tuple(shape):
        return
    message = f"{what} shape {list(y.dims)} should be {list(shape)}"
    if tuple(shape) != () or y.dims != (1,):
        raise invalid(message)
    tolerate("scalar-out-shape", message)   # a 0-d result written to one element


def _accumulator(acl: int) -> np.dtype:
    s = dtypes.short(acl)
    if s in dtypes.FLOATS or s in dtypes.COMPLEX:
        return dtypes.compute_dtype(acl)
    return np.dtype(np.int64)


@operator("ReduceSum")
def reduce_sum(self, dims, keep_dims, dtype, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    need_dtype(x, "self", SUM_TYPES)
    need_dtype(y, "out", SUM_TYPES)
    need_dims((x, "self"), (y, "out"))
    if not dtypes.known(dtype) or dtypes.short(dtype) not in SUM_TYPES:
        raise invalid(f"dtype {dtypes.name(dtype)} is not a supported output type")
    if y.dtype != dtype:
        raise invalid(f"out dtype {dtypes.name(y.dtype)} should be dtype {dtypes.name(dtype)}")
    need_cast(x.dtype, dtype, "self -> dtype")
    axes = _axes(int_array(dims, "dims"), x.ndim, "dims")
    _need_out_shape(y, _reduced(x.dims, axes, keep_dims))
    acc = _accumulator(dtype)
    return Plan(in_type(dtype, lambda a: np.sum(as_compute(a, dtype).astype(acc, copy=False),
                                                axis=axes, keepdims=keep_dims)), [x], [y])


@operator("Mean")
def mean(self, dim, keep_dim, dtype, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    need_dtype(x, "self", MEAN_TYPES)
    need_dtype(y, "out", MEAN_TYPES)
    need_dims((x, "self"), (y, "out"))
    if not dtypes.known(dtype) or dtypes.short(dtype) not in MEAN_TYPES:
        raise invalid(f"dtype {dtypes.name(dtype)} is not a supported type")
    need_cast(x.dtype, dtype, "self -> dtype")
    need_cast(dtype, y.dtype, "dtype -> out")
    axes = _axes(int_array(dim, "dim"), x.ndim, "dim")
    _need_out_shape(y, _reduced(x.dims, axes, keep_dim))
    acc = _accumulator(dtype)

    def compute(a):
        m = np.mean(as_compute(a, dtype).astype(acc, copy=False), axis=axes, keepdims=keep_dim, dtype=acc)
        return dtypes.convert(m, dtype)
    return Plan(compute, [x], [y])


@operator("ArgMax")
def arg_max(self, dim, keepdim, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    need_dtype(x, "self", ARGMAX_TYPES)
    need_dtype(y, "out", {"s32", "s64"})
    need_dims((x, "self"), (y, "out"))
    d = _axis(dim, max(x.ndim, 1))
    _need_out_shape(y, _reduced(x.dims, (d,), keepdim))

    def compute(a):
        i = np.argmax(as_compute(a, x.dtype), axis=d)   # the first maximum
        return np.expand_dims(i, d) if keepdim else i
    return Plan(compute, [x], [y])


@operator("EqTensor")
def eq_tensor(self, other, out):
    x, o, y = tensor(self, "self"), tensor(other, "other"), tensor(out, "out")
    need_dtype(x, "self", EQ_TYPES)
    need_dtype(o, "other", EQ_TYPES)
    need_dtype(y, "out", EQ_TYPES)
    need_dims((x, "self"), (o, "other"), (y, "out"))
    work = promote(x.dtype, o.dtype, "self", "other")
    need_cast(dtypes.BY_NAME["bool"], y.dtype, "BOOL -> out")
    _need_out_shape(y, broadcast(x.dims, o.dims, "self", "other"))
    return Plan(lambda a, b: as_compute(a, work) == as_compute(b, work), [x, o], [y])


@operator("InplaceEqTensor")
def inplace_eq_tensor(self_ref, other):
    """selfRef = (selfRef == other), 1 or 0 in selfRef's own type (ops-math
    aclnnEqTensor&aclnnInplaceEqTensor.md): EqTensor's types and deduction; other
    broadcasts to selfRef's shape, which must be the broadcast shape; exactly one of them
    empty is refused."""
    x, o = tensor(self_ref, "selfRef"), tensor(other, "other")
    need_dtype(x, "selfRef", EQ_TYPES)
    need_dtype(o, "other", EQ_TYPES)
    need_dims((x, "selfRef"), (o, "other"))
    work = promote(x.dtype, o.dtype, "selfRef", "other")
    if broadcast(x.dims, o.dims, "selfRef", "other") != tuple(x.dims):
        raise invalid(f"the broadcast shape of selfRef {list(x.dims)} and other {list(o.dims)} "
                      f"should be selfRef's")
    if (0 in x.dims) != (0 in o.dims):
        raise invalid("selfRef and other: exactly one of them is empty")
    return Plan(lambda a, b: as_compute(a, work) == as_compute(b, work), [x, o], [x])


@operator("Cumsum")
def cumsum(self, dim, dtype, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    need_dtype(x, "self", CUMSUM_TYPES)   # BOOL is not in the page's list
    need_dtype(y, "out", CUMSUM_TYPES)
    need_dims((x, "self"), (y, "out"))
    if not dtypes.known(dtype) or y.dtype != dtype:
        raise invalid(f"dtype {dtypes.name(dtype)} should be out's dtype {dtypes.name(y.dtype)}")
    need_cast(x.dtype, y.dtype, "self -> out")
    need_same_shape(x, y, "self", "out")
    d = _axis(dim, max(x.ndim, 1))
    acc = _accumulator(dtype)
    return Plan(in_type(dtype, lambda a: np.cumsum(as_compute(a, dtype).astype(acc, copy=False), axis=d)),
                [x], [y])


@operator("Argsort")
def argsort(self, dim, descending, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    need_dtype(x, "self", SORT_TYPES)
    need_dtype(y, "out", {"s64"})
    need_dims((x, "self"), (y, "out"))
    need_same_shape(x, y, "self", "out")
    d = _axis(dim, max(x.ndim, 1))
    if x.dtype == lib.ACL_BF16 and x.ndim and x.dims[d] == 1:   # its return-code table
        raise invalid("self BFLOAT16 with a sort axis of size 1 is not supported")
    # the page promises a deterministic order, not a stable one: equal keys come in an
    # order fixed by CANN_SIM_SEED and the shape, which no client may rely on
    n = x.dims[d] if x.ndim else 1
    perm = np.random.default_rng((STATE.seed & 0xFFFFFFFF, *x.dims)).permutation(n)

    def compute(a):
        v = np.take(as_compute(a, x.dtype), perm, axis=d) if x.ndim else as_compute(a, x.dtype)
        if descending:   # order-reversing maps
            v = -v if v.dtype.kind == "f" else ~v.astype(np.int64)
        idx = np.argsort(v, axis=d, kind="stable")
        return perm[idx] if x.ndim else idx
    return Plan(compute, [x], [y])
