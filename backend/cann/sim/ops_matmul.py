"""aclnnMm and aclnnMatmul (ops-nn mat_mul_v3), per their public docs for Atlas A2 / A3:

  * self, mat2, out: FLOAT, FLOAT16 or BFLOAT16, format ND, non-contiguous inputs allowed;
    Mm takes 2-D tensors only, Matmul 1-6 dims with torch.matmul's rules (1-D operands,
    broadcast batch dims);
  * self and mat2 types follow the deduction table, except that on A2 / A3 BFLOAT16 with
    FLOAT16 or FLOAT32 cannot be deduced (aclnnMatmul's constraints; the same rule check
    serves aclnnMm); the deduced type must convert to out's;
  * the reduce dims must match, out must have the product's shape;
  * cubeMathType 0..4: 1 (ALLOW_FP32_DOWN_PRECISION) and 3 (USE_HF32) compute FLOAT
    inputs as HFLOAT32 (modelled as a 10-bit mantissa; 3 refuses other types), 2
    (USE_FP16) computes them as FLOAT16 (and refuses BFLOAT16), 0 and 4 keep the type.
The cube multiplies the (rounded) inputs exactly and accumulates in f32.
"""
from __future__ import annotations

import numpy as np

from .binding import lib

from . import dtypes
from .aclnn import Plan, invalid, need_cast, need_dims, need_dtype, operator, tensor

F = {"f32", "f16", "bf16"}
BF16 = dtypes.numpy_dtype(lib.ACL_BF16)
KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, USE_HF32, USE_FP32_ADD = range(5)


def _hf32(a: np.ndarray) -> np.ndarray:
    """float32 values rounded to a 10-bit mantissa (nearest, ties to even)."""
    u = np.array(a, np.float32).view(np.uint32)   # a fresh copy, rounded in place
    keep = u >> np.uint32(13)
    keep &= np.uint32(1)
    u += np.uint32(0xFFF)
    u += keep
    u &= np.uint32(0xFFFFE000)
    return u.view(np.float32)


def _as_f32(v: np.ndarray) -> np.ndarray:
    if v.dtype == BF16:
        # bfloat16 is the upper half of a float32: widen the bits (exact, and fast)
        return (v.view(np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)
    return np.asarray(v, np.float32)


def _check(self_p, mat2_p, out_p, cube, lo, hi):
    a, b, y = tensor(self_p, "self"), tensor(mat2_p, "mat2"), tensor(out_p, "out")
    for t, name in ((a, "self"), (b, "mat2"), (y, "out")):
        need_dtype(t, name, F)
        if t.format != lib.ACL_FORMAT_ND:
            raise invalid(f"{name} format {t.format} is not ND")
    need_dims((a, "self"), (b, "mat2"), (y, "out"), lo=lo, hi=hi)
    sa, sb = dtypes.short(a.dtype), dtypes.short(b.dtype)
    if sa != sb and "bf16" in (sa, sb):
        raise invalid(f"self dtype {dtypes.name(a.dtype)} and mat2 dtype {dtypes.name(b.dtype)} "
                      "cannot be deduced (BFLOAT16 only pairs with BFLOAT16)")
    work = dtypes.promote(a.dtype, b.dtype)
    need_cast(work, y.dtype, "deduced type -> out")
    if cube not in range(5):
        raise invalid(f"cubeMathType {cube} should be in 0..4")
    w = dtypes.short(work)
    if cube == USE_FP16 and w == "bf16":
        raise invalid("cubeMathType USE_FP16 is not supported for BFLOAT16 inputs")
    if cube == USE_HF32 and w != "f32":
        raise invalid("cubeMathType USE_HF32 needs FLOAT inputs")

    def rounding(v: np.ndarray) -> np.ndarray:
        v = _as_f32(np.asarray(v))
        if w != "f32" or cube in (KEEP_DTYPE, USE_FP32_ADD):
            return v
        if cube == USE_FP16:
            return v.astype(np.float16).astype(np.float32)
        return _hf32(v)
    rounds = w == "f32" and cube not in (KEEP_DTYPE, USE_FP32_ADD)
    return a, b, y, rounding, rounds


BLOCK_COLS, BIG = 128, 1 << 20


def product(rounding, rounds: bool):
    """compute(x1, x2) = np.matmul of the rounded operands. A big mat2 that is rounded is
    rounded a block of columns at a time, so that its rounded copies stay in the cache
    (rounding all of it first costs two more passes through memory)."""
    def compute(x1, x2):
        x1 = rounding(x1)
        if not rounds or x2.ndim < 2 or x2.size < BIG or x2.shape[-1] <= BLOCK_COLS:
            return np.matmul(x1, rounding(x2))
        cols = range(0, x2.shape[-1], BLOCK_COLS)
        return np.concatenate([np.matmul(x1, rounding(x2[..., j:j + BLOCK_COLS])) for j in cols],
                              axis=-1)
    return compute


@operator("Mm")
def mm(self, mat2, out, cube_math_type):
    a, b, y, rounding, rounds = _check(self, mat2, out, cube_math_type, 2, 2)
    if a.dims[1] != b.dims[0]:
        raise invalid(f"the k-axis of self {list(a.dims)} and mat2 {list(b.dims)} differ")
    if y.dims != (a.dims[0], b.dims[1]):
        raise invalid(f"out shape {list(y.dims)} should be {[a.dims[0], b.dims[1]]}")
    return Plan(product(rounding, rounds), [a, b], [y])


def _matmul_shape(sa: tuple, sb: tuple) -> tuple:
    """torch.matmul's result shape (1-D operands are promoted, then squeezed)."""
    a = (1,) + sa if len(sa) == 1 else sa
    b = sb + (1,) if len(sb) == 1 else sb
    if a[-1] != b[-2]:
        raise invalid(f"the k-axis of self {list(sa)} and mat2 {list(sb)} differ")
    ba, bb = a[:-2], b[:-2]
    n = max(len(ba), len(bb))
    ba, bb = (1,) * (n - len(ba)) + ba, (1,) * (n - len(bb)) + bb
    batch = []
    for x, z in zip(ba, bb):
        if x != z and 1 not in (x, z):
            raise invalid(f"self {list(sa)} and mat2 {list(sb)} batch dims cannot broadcast")
        batch.append(z if x == 1 else x)
    shape = tuple(batch) + ((a[-2],) if len(sa) > 1 else ()) + ((b[-1],) if len(sb) > 1 else ())
    return shape


@operator("Matmul")
def matmul(self, mat2, out, cube_math_type):
    a, b, y, rounding, rounds = _check(self, mat2, out, cube_math_type, 1, 6)
    shape = _matmul_shape(a.dims, b.dims)
    if y.dims != shape:
        raise invalid(f"out shape {list(y.dims)} should be {list(shape)}")
    return Plan(product(rounding, rounds), [a, b], [y])
