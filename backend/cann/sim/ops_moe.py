"""aclnnIndexSelect and aclnnBatchMatMul, per their public docs for Atlas A2 / A3.

IndexSelect (self, dim, index, out): out = self with axis `dim` replaced by index's
length, out[.., i, ..] = self[.., index[i], ..]
  * self: FLOAT, FLOAT16, BFLOAT16, DOUBLE, INT8/16/32/64, UINT8/16/32/64, BOOL,
    COMPLEX64/128;
    ND, at most 8 dims, non-contiguous allowed; out: self's dtype and format;
  * dim in [-self.dim(), self.dim()); index: INT32 or INT64, 0-D or 1-D, no negative
    values (an index outside the axis faults the kernel).
BatchMatMul (self, mat2, out, cubeMathType): out[b] = self[b] @ mat2[b] on 3-D tensors;
a batch axis of 1 on either side broadcasts. Types, formats and cubeMathType as
aclnnMatmul (ops_matmul.py's checks).
"""
from __future__ import annotations

import math

import numpy as np

from .binding import lib

from .aclnn import Plan, invalid, need_dims, need_nd, need_dtype, need_same_dtype, operator, tensor
from .cost import CUBE, matmul_flops, moves
from .ops_matmul import _check, product_plan
from .ops_movement import _dim
from .refusals import SimError

SELECT_TYPES = {"f32", "f16", "bf16", "f64", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64",
                "bool", "c64", "c128"}


@operator("IndexSelect", flops=moves)
def index_select(self, dim, index, out):
    x, idx, y = tensor(self, "self"), tensor(index, "index"), tensor(out, "out")
    need_dtype(x, "self", SELECT_TYPES)
    need_dtype(idx, "index", {"s32", "s64"})
    need_same_dtype(x, y, "self", "out")
    need_nd((x, "self"), (idx, "index"), (y, "out"))
    need_dims((x, "self"), (y, "out"), lo=0, hi=8)
    need_dims((idx, "index"), lo=0, hi=1)
    d = _dim(int(dim), x.ndim, "dim")
    n_idx = math.prod(idx.dims)
    if x.ndim == 0 and idx.dims != (1,):   # 约束说明: a 0-D self takes an index of shape [1]
        raise invalid(f"index shape {list(idx.dims)} should be [1] for a 0-D self")
    expect = x.dims[:d] + (n_idx,) + x.dims[d + 1:] if x.ndim else (n_idx,)
    if y.dims != expect:
        raise invalid(f"out shape {list(y.dims)} should be {list(expect)} (self {list(x.dims)}, "
                      f"dim {d}, {n_idx} indices)")
    n = x.dims[d] if x.ndim else 1

    def compute(a, ids):
        ids = np.asarray(ids, np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            bad = int(ids.min() if ids.min() < 0 else ids.max())
            raise SimError(lib.ACL_ERROR_RT_AICORE_EXCEPTION,
                           f"aclnnIndexSelect: index value {bad} outside self dim {d} of size {n}")
        return np.take(a.reshape(x.dims or (1,)), ids, axis=d)
    return Plan(compute, [x, idx], [y])


@operator("BatchMatMul", unit=CUBE, flops=matmul_flops)
def batch_matmul(self, mat2, out, cube_math_type):
    a, b, y, cube = _check(self, mat2, out, cube_math_type, 3, 3)
    if a.dims[2] != b.dims[1]:
        raise invalid(f"the k-axis of self {list(a.dims)} and mat2 {list(b.dims)} differ")
    if a.dims[0] != b.dims[0] and 1 not in (a.dims[0], b.dims[0]):
        raise invalid(f"batch of self {a.dims[0]} and mat2 {b.dims[0]} differ and neither is 1")
    shape = (max(a.dims[0], b.dims[0]), a.dims[1], b.dims[2])
    if y.dims != shape:
        raise invalid(f"out shape {list(y.dims)} should be {list(shape)}")
    return product_plan(a, b, y, cube)
