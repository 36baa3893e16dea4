"""aclnnInplaceIndexCopy (ops-math index_copy), as its aclnn page describes it for Atlas
A2/A3: selfRef[..., index[i], ...] = source[..., i, ...] along `dim`.

* selfRef: FLOAT, BFLOAT16, FLOAT16, INT32, INT64, INT16, INT8, UINT8, DOUBLE, BOOL,
  COMPLEX64, COMPLEX128; ND; dim in [-selfRef.dim(), selfRef.dim() - 1].
* index: INT32 or INT64, at most 1 dim, as many elements as source has along dim; ids
  out of range are not supported (the kernel faults); repeated ids leave the order open.
* source: selfRef's dtype and number of dims, index's length along dim, selfRef's shape
  elsewhere.
"""
from __future__ import annotations

import numpy as np

from .binding import lib

from .aclnn import Plan, need_nd, invalid, need_dims, need_dtype, need_same_dtype, operator, tensor
from .cost import moves
from .refusals import SimError

SELF_TYPES = {"f32", "bf16", "f16", "s32", "s64", "s16", "s8", "u8", "f64", "bool", "c64", "c128"}


@operator("InplaceIndexCopy", flops=moves)
def inplace_index_copy(self_ref, dim, index, source):
    x, idx, src = tensor(self_ref, "selfRef"), tensor(index, "index"), tensor(source, "source")
    need_dtype(x, "selfRef", SELF_TYPES)
    need_dtype(idx, "index", {"s32", "s64"})
    need_same_dtype(x, src, "selfRef", "source")
    need_nd((x, "selfRef"), (idx, "index"), (src, "source"))
    need_dims((x, "selfRef"), (src, "source"))
    need_dims((idx, "index"), hi=1)
    n = max(x.ndim, 1)
    if not -n <= int(dim) <= n - 1:
        raise invalid(f"dim {int(dim)} should be in [{-n}, {n - 1}]")
    d = int(dim) % n
    if src.ndim != x.ndim:
        raise invalid(f"source has {src.ndim} dims, selfRef {x.ndim}: they should be the same")
    n_ids = int(np.prod(idx.dims, dtype=np.int64))
    expect = x.dims[:d] + (n_ids,) + x.dims[d + 1:] if x.ndim else x.dims
    if src.dims != expect:
        raise invalid(f"source shape {list(src.dims)} should be {list(expect)} (selfRef "
                      f"{list(x.dims)}, dim {d}, {n_ids} index values)")
    size = x.dims[d] if x.ndim else 1

    def compute(a, ids, rows):
        ids = ids.reshape(-1).astype(np.int64)
        if ids.size and (ids.min() < 0 or ids.max() >= size):
            bad = int(ids.min() if ids.min() < 0 else ids.max())
            raise SimError(lib.ACL_ERROR_RT_AICORE_EXCEPTION,
                           f"aclnnInplaceIndexCopy: index value {bad} outside selfRef dim {d} of size {size}")
        out = np.array(a, copy=True)
        if x.ndim:
            out[(slice(None),) * d + (ids,)] = rows
        elif ids.size:
            out[...] = rows
        return out
    return Plan(compute, [x, idx, src], [x])
