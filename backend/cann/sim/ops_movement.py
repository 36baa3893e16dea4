"""Data-movement aclnn operators (ops-math tile / concat_d / pad_v3 / circular_pad /
mirror_pad / roll / range / fill / tril / triu, ops-nn gather_v2).

Per operator, what its aclnn page says for Atlas A2/A3 (the simulated Ascend910B1): the
dtypes of each tensor, the dims it takes, how out's shape follows from the inputs, and
the listed ACLNN_ERR_PARAM_INVALID cases. aclTensorList (aclnnCat's input) lives in
acl_meta.py with the other descriptors.
"""
from __future__ import annotations

import math

import numpy as np

from .binding import ffi, lib

from . import dtypes
from .aclnn import (Plan, need_nd, as_compute, int_array, invalid, need_cast, need_dims, need_dtype,
                    need_same_dtype, need_same_shape, operator, promote, scalar, tensor)
from .cost import moves
from .descriptors import TensorDesc
from .refusals import SimError
from .state import STATE

# integer and float types the A2 pages list for most of these operators
BASIC = {"f32", "f16", "bf16", "f64", "s8", "u8", "s16", "s32", "s64", "bool"}


def _dim(d: int, ndim: int, what: str) -> int:
    lo, hi = -max(ndim, 1), max(ndim, 1) - 1
    if not lo <= d <= hi:
        raise invalid(f"{what} {d} should be in [{lo}, {hi}]")
    return d % max(ndim, 1)


# ------------------------------------------------------------------ Repeat ----

@operator("Repeat", flops=moves)
def repeat(self, repeats, out):
    """x.repeat(*repeats): self's shape padded with leading 1s to len(repeats), times
    repeats. The broadcast kernel takes at most 4 non-1 repeats when the first one is
    not 1, else at most 3 (documented as ACLNN_ERR_INNER_NULLPTR)."""
    x, y = tensor(self, "self"), tensor(out, "out")
    reps = int_array(repeats, "repeats")
    types = BASIC | {"u16", "u32", "u64", "c64", "c128"}
    need_dtype(x, "self", types)
    need_same_dtype(x, y, "self", "out")
    need_nd((x, "self"), (y, "out"))
    need_dims((x, "self"), (y, "out"))
    if len(reps) < x.ndim or len(reps) > 8:
        raise invalid(f"repeats has {len(reps)} values; it needs between self's {x.ndim} dims and 8")
    if min(reps, default=0) < 0:
        raise invalid(f"repeats {list(reps)} has a negative value")
    shape = (1,) * (len(reps) - x.ndim) + x.dims
    expect = tuple(n * r for n, r in zip(shape, reps))
    if y.dims != expect:
        raise invalid(f"out shape {list(y.dims)} should be {list(expect)}")
    n_rep = sum(r != 1 for r in reps)
    if n_rep > (4 if reps and reps[0] != 1 else 3):
        raise SimError(lib.ACLNN_ERR_INNER_NULLPTR,
                       f"repeats {list(reps)}: more than {4 if reps[0] != 1 else 3} dims repeated at once")
    return Plan(lambda a: np.tile(a.reshape(shape), reps), [x], [y])


# --------------------------------------------------------------------- Cat ----

def _tensor_list(ptr, what: str) -> list[TensorDesc]:
    if ptr == ffi.NULL:
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, f"{what} is nullptr")
    items = STATE.tensor_lists.get(ptr, what)
    return [tensor(ffi.cast("aclTensor *", h), f"{what}[{i}]") for i, h in enumerate(items)]


@operator("Cat", flops=moves)
def cat(tensors, dim, out):
    parts, y = _tensor_list(tensors, "tensors"), tensor(out, "out")
    types = BASIC | {"c64"}
    if not parts:
        raise invalid("tensors is empty")
    work = parts[0].dtype
    for i, t in enumerate(parts):
        need_dtype(t, f"tensors[{i}]", types)
        need_dims((t, f"tensors[{i}]"), lo=1)
        work = promote(work, t.dtype, "tensors", f"tensors[{i}]")
    need_dtype(y, "out", types)
    need_cast(work, y.dtype, "promoted type of tensors -> out")
    need_nd(*((t, "tensors") for t in parts), (y, "out"))
    nd = parts[0].ndim
    d = _dim(int(dim), nd, "dim")
    for i, t in enumerate(parts):
        if t.ndim != nd or any(a != b for k, (a, b) in enumerate(zip(t.dims, parts[0].dims)) if k != d):
            raise invalid(f"tensors[{i}] shape {list(t.dims)} differs from tensors[0] "
                          f"{list(parts[0].dims)} outside dim {d}")
    expect = list(parts[0].dims)
    expect[d] = sum(t.dims[d] for t in parts)
    if y.dims != tuple(expect):
        raise invalid(f"out shape {list(y.dims)} should be {expect}")
    return Plan(lambda *arrays: np.concatenate([as_compute(a, work) for a in arrays], axis=d), parts, [y])


# ---------------------------------------------------------------- GatherV2 ----

@operator("GatherV2", flops=moves)
def gather_v2(self, dim, index, out):
    """out = self with dim `dim` replaced by index's shape, out[..., i, ...] =
    self[..., index[i], ...]. Its page: index values "取值范围在0 ~ self.shape[dim]内（包含0，
    不包含self.shape[dim]）"; one outside [0, n) faults the kernel."""
    x, idx, y = tensor(self, "self"), tensor(index, "index"), tensor(out, "out")
    need_dtype(x, "self", BASIC | {"c64", "c128"})
    need_dtype(idx, "index", {"s32", "s64"})
    need_same_dtype(x, y, "self", "out")
    need_nd((x, "self"), (idx, "index"), (y, "out"))
    need_dims((x, "self"), (idx, "index"), (y, "out"), lo=1)
    d = _dim(int(dim), x.ndim, "dim")
    expect = x.dims[:d] + idx.dims + x.dims[d + 1:]
    if y.dims != expect:
        raise invalid(f"out shape {list(y.dims)} should be {list(expect)} (self {list(x.dims)}, "
                      f"dim {d}, index {list(idx.dims)})")
    n = x.dims[d]

    def compute(a, ids):
        ids = ids.astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            raise SimError(lib.ACL_ERROR_RT_AICORE_EXCEPTION,
                           f"aclnnGatherV2: index value {int(ids.min() if ids.min() < 0 else ids.max())} "
                           f"outside self dim {d} of size {n}")
        return np.take(a, ids, axis=d)
    return Plan(compute, [x, idx], [y])


# -------------------------------------------------------------------- pads ----

@operator("ConstantPadNd", flops=moves)
def constant_pad_nd(self, pad, value, out):
    """pad = (begin, end) pairs from the last dim backwards; negative values crop."""
    x, y = tensor(self, "self"), tensor(out, "out")
    p, v = int_array(pad, "pad"), scalar(value, "value")
    types = BASIC | {"u16", "u32", "u64", "c64", "c128"}
    need_dtype(x, "self", types)
    need_same_dtype(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"))
    if dtypes.promote_scalar(x.dtype, v.dtype) is None:
        raise invalid(f"self dtype {dtypes.name(x.dtype)} and value dtype {dtypes.name(v.dtype)} "
                      "cannot be promoted")
    if len(p) % 2 or len(p) > 2 * x.ndim:
        raise invalid(f"pad has {len(p)} values: an even number up to twice self's {x.ndim} dims")
    if x.format != lib.ACL_FORMAT_ND and y.format != x.format:
        raise invalid("out format should be self's")
    pairs = [(0, 0)] * x.ndim
    for k in range(len(p) // 2):
        pairs[x.ndim - 1 - k] = (p[2 * k], p[2 * k + 1])
    expect = tuple(n + b + e for n, (b, e) in zip(x.dims, pairs))
    if min(expect, default=0) < 0 or (max(p, default=0) > 0 and 0 in expect):
        raise invalid(f"pad {list(p)} makes an out shape {list(expect)} with a negative or zero dim")
    if y.dims != expect:
        raise invalid(f"out shape {list(y.dims)} should be {list(expect)}")
    fill = dtypes.convert(np.asarray(v.value), x.dtype)

    def compute(a):
        crop = tuple(slice(max(-b, 0), n - max(-e, 0)) for n, (b, e) in zip(a.shape, pairs))
        grow = [(max(b, 0), max(e, 0)) for b, e in pairs]
        return np.pad(a[crop], grow, constant_values=fill)
    return Plan(compute, [x], [y])


def _mirror_or_wrap(self, padding, out, op, types, dims, n_pad, limits=None):
    """aclnnReflectionPad1d / aclnnCircularPad2d: the last len(padding) // 2 dims padded,
    (left, right) of the last dim first; every value below that dim's size."""
    x, y = tensor(self, "self"), tensor(out, "out")
    p = int_array(padding, "padding")
    need_dtype(x, "self", types)
    need_same_dtype(x, y, "self", "out")
    need_nd((x, "self"), (y, "out"))
    need_dims((x, "self"), (y, "out"), lo=dims[0], hi=dims[1])
    if y.ndim != x.ndim:
        raise invalid(f"out has {y.ndim} dims, self {x.ndim}")
    if len(p) != n_pad:
        raise invalid(f"padding has {len(p)} values, {n_pad} expected")
    if 0 in x.dims and (x.ndim == dims[0] or 0 in x.dims[1:]):
        raise invalid(f"self shape {list(x.dims)}: empty tensors are not supported here")
    pairs = [(0, 0)] * x.ndim
    for k in range(n_pad // 2):
        b, e = p[2 * k], p[2 * k + 1]
        n = x.dims[x.ndim - 1 - k]
        if not (0 <= b < n and 0 <= e < n):
            raise invalid(f"padding {list(p)}: values must be in [0, {n}) for a dim of size {n}")
        pairs[x.ndim - 1 - k] = (b, e)
    expect = tuple(n + b + e for n, (b, e) in zip(x.dims, pairs))
    if y.dims != expect:
        raise invalid(f"out shape {list(y.dims)} should be {list(expect)}")
    if limits and y.dims[-1] >= limits[dtypes.short(x.dtype)]:
        raise invalid(f"out's last dim {y.dims[-1]} should be below "
                      f"{limits[dtypes.short(x.dtype)]} for {dtypes.name(x.dtype)}")
    return Plan(lambda a: np.pad(a, pairs, mode=op), [x], [y])


@operator("ReflectionPad1d", flops=moves)
def reflection_pad1d(self, padding, out):
    return _mirror_or_wrap(self, padding, out, "reflect", BASIC | {"c64", "c128"}, (2, 3), 2)


@operator("CircularPad2d", flops=moves)
def circular_pad2d(self, padding, out):
    limits = {"s8": 98176, "f16": 49088, "bf16": 49088, "s32": 24544, "f32": 24544}
    return _mirror_or_wrap(self, padding, out, "wrap", set(limits), (3, 4), 4, limits)


# -------------------------------------------------------------------- Roll ----

@operator("Roll", flops=moves)
def roll(x, shifts, dims, out):
    """torch.roll: elements move `shift` places forward along each dim (the flattened
    tensor when dims is empty, with exactly one shift)."""
    a, y = tensor(x, "x"), tensor(out, "out")
    s, d = int_array(shifts, "shifts"), int_array(dims, "dims") if dims != ffi.NULL else ()
    need_dtype(a, "x", {"bf16", "f16", "f32", "s8", "u8", "s32", "s64", "u32", "bool", "s16"})
    need_same_dtype(a, y, "x", "out")
    need_nd((a, "x"), (y, "out"))
    need_dims((a, "x"), (y, "out"))
    need_same_shape(a, y, "x", "out")
    if d and len(s) != len(d):
        raise invalid(f"shifts {list(s)} and dims {list(d)} differ in length")
    if not d and len(s) != 1:
        raise invalid(f"without dims, shifts must have one value, not {len(s)}")
    axes = tuple(_dim(k, a.ndim, "dims value") for k in d)
    if d:
        return Plan(lambda v: np.roll(v, s, axis=axes), [a], [y])
    return Plan(lambda v: np.roll(v.reshape(-1), s[0]).reshape(v.shape), [a], [y])


# ------------------------------------------------------------------ Arange ----

@operator("Arange")
def arange(start, end, step, out):
    """out[i] = start + i * step over [start, end): out has ceil((end - start) / step)
    elements, counted in float when the scalars are float (the page's warning)."""
    lo, hi, st = scalar(start, "start"), scalar(end, "end"), scalar(step, "step")
    y = tensor(out, "out")
    types = {"f16", "f32", "f64", "u8", "s8", "s16", "s32", "s64", "bool", "bf16"}
    for sc, what in ((lo, "start"), (hi, "end"), (st, "step")):
        if dtypes.short(sc.dtype) not in types:
            raise invalid(f"{what} dtype {dtypes.name(sc.dtype)} is not supported")
    need_dtype(y, "out", {"f16", "f32", "f64", "s32", "s64", "bf16"})
    need_nd((y, "out"))
    a, b, k = lo.value, hi.value, st.value
    if k == 0 or (k > 0 and a > b) or (k < 0 and a < b):
        raise invalid(f"start {a}, end {b}, step {k} is not a range")
    if any(dtypes.short(sc.dtype) == "f64" for sc in (lo, hi, st)):
        count = math.ceil((b - a) / k)
    elif any(dtypes.short(sc.dtype) in dtypes.FLOATS for sc in (lo, hi, st)):
        f = np.float32
        count = int(np.ceil((f(b) - f(a)) / f(k)))
    else:
        count = -(-(b - a) // k)
    # the page: out is the 1-D [N] the caller sizes, and the operator checks only dtypes and
    # nullptrs, "不重新校验 N": N contiguous elements of any shape are what the kernel writes
    if math.prod(y.dims) != count or not y.is_contiguous():
        raise invalid(f"out shape {list(y.dims)} should hold [{count}] contiguous elements")
    work = dtypes.compute_dtype(y.dtype)
    return Plan(lambda: np.arange(count, dtype=work) * work.type(k) + work.type(a), [], [y])


# -------------------------------------------------------------- fill, tri ----

@operator("InplaceFillScalar", flops=moves)
def inplace_fill_scalar(self_ref, value):
    t, v = tensor(self_ref, "selfRef"), scalar(value, "value")
    need_dtype(t, "selfRef", BASIC | {"u16", "u32", "u64", "c64", "c128"})
    need_dims((t, "selfRef"))
    need_cast(v.dtype, t.dtype, "value -> selfRef")
    fill = dtypes.convert(np.asarray(v.value), t.dtype)
    return Plan(lambda: fill, [], [t])


TRI_TYPES = {"f64", "f32", "f16", "s16", "s32", "s64", "s8", "u16", "u32", "u64", "u8", "bool", "bf16"}


def _tri(self_p, diagonal, out_p, lower: bool, inplace: bool, zero_dims_ok: bool):
    """Tril keeps column <= row + diagonal, Triu column >= row + diagonal (last two dims),
    zeroing the rest."""
    x = tensor(self_p, "selfRef" if inplace else "self")
    y = x if inplace else tensor(out_p, "out")
    need_dtype(x, "self", TRI_TYPES)
    if not inplace:
        need_same_dtype(x, y, "self", "out")
        need_same_shape(x, y, "self", "out")
        if x.format != y.format:
            raise invalid("self and out formats differ")
    if lower:
        need_nd((x, "self"))
    elif x.format in (lib.ACL_FORMAT_FRACTAL_NZ, lib.ACL_FORMAT_FRACTAL_Z, lib.ACL_FORMAT_NC1HWC0):
        raise invalid("self has a private format")
    if not (2 <= x.ndim <= 8 or (zero_dims_ok and x.ndim == 0)):
        raise invalid(f"self has {x.ndim} dims, should be 2-8")
    k = int(diagonal)
    fn = np.tril if lower else np.triu
    return Plan(lambda a: a if a.ndim == 0 else fn(a, k), [x], [y])


@operator("Tril", flops=moves)
def tril(self, diagonal, out):
    return _tri(self, diagonal, out, True, False, False)


@operator("Triu", flops=moves)
def triu(self, diagonal, out):
    return _tri(self, diagonal, out, False, False, True)


@operator("InplaceTriu", flops=moves)
def inplace_triu(self_ref, diagonal):
    return _tri(self_ref, diagonal, None, False, True, False)


# ----------------------------------------------------------------- Permute ----

@operator("Permute", flops=moves)
def permute(self, dims, out):
    """out = self.permute(dims) (ops-math transpose): dims a permutation of self's axes,
    each in [-n, n-1]; out of self's dtype and the permuted shape; at most 8 dims."""
    x, y = tensor(self, "self"), tensor(out, "out")
    order = int_array(dims, "dims")
    types = BASIC | {"u16", "u32", "u64", "c64", "c128"}
    need_dtype(x, "self", types)
    need_dtype(y, "out", types)
    need_same_dtype(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"))
    axes = tuple(_dim(d, x.ndim, "dims value") for d in order)
    if sorted(axes) != list(range(x.ndim)):
        raise invalid(f"dims {list(order)} is not a permutation of self's {x.ndim} axes")
    shape = tuple(x.dims[a] for a in axes)
    if y.dims != shape:
        raise invalid(f"out shape {list(y.dims)} should be {list(shape)}")
    return Plan(lambda a: np.transpose(a, axes), [x], [y])


# -------------------------------------------------- InplaceIndexFillTensor ----

@operator("InplaceIndexFillTensor", flops=moves)
def inplace_index_fill_tensor(self_ref, dim, index, value):
    """selfRef[.., index[i], ..] = value along `dim` (ops-nn index_fill_d): selfRef FLOAT16
    / FLOAT / INT32 / INT64 / BOOL / BFLOAT16, 0-8 dims; dim in [-n, n) ([-1, 1) for a 0-D
    selfRef); every index value inside the axis (negative ones count from its end, as
    the source checks); value a non-complex scalar that converts to selfRef's type."""
    x = tensor(self_ref, "selfRef")
    idx = int_array(index, "index")
    v = scalar(value, "value")
    need_dtype(x, "selfRef", {"f16", "f32", "s32", "s64", "bool", "bf16"})
    need_dims((x, "selfRef"))
    if dtypes.short(v.dtype) in dtypes.COMPLEX:
        raise invalid(f"value dtype {dtypes.name(v.dtype)} is complex")
    need_cast(v.dtype, x.dtype, "value -> selfRef")
    axis = _dim(dim, x.ndim, "dim")
    size = x.dims[axis] if x.ndim else 1
    outside = [i for i in idx if not -size <= i < size]
    if outside:
        raise invalid(f"index values {outside} are outside dim {dim} of size {size}")
    fill = dtypes.convert(np.asarray(v.value), x.dtype)
    where = (slice(None),) * axis + (sorted({i % size for i in idx}),)

    def compute(a):
        r = np.array(a)
        if idx:
            r[where if x.ndim else ...] = fill
        return r
    return Plan(compute, [x], [x])
