"""Copies (ops-math cast, view_copy's aclnnInplaceCopy)."""
from __future__ import annotations

from . import dtypes
from .aclnn import Plan, broadcast, invalid, need_dims, need_dtype, operator, tensor
from .cost import moves

COMPLEX = {"c64", "c128"}
REAL = {"f16", "f32", "f64", "s8", "u8", "s16", "u16", "s32", "u32", "s64", "u64", "bool", "bf16"}


@operator("Cast", flops=moves)
def cast(self, dtype, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    types = REAL | COMPLEX
    need_dtype(x, "self", types)
    need_dtype(y, "out", types)
    if not dtypes.known(dtype) or dtypes.short(dtype) not in types:
        raise invalid(f"dtype {dtypes.name(dtype)} is not a supported output type")
    if x.dims != y.dims:
        raise invalid(f"self shape {list(x.dims)} and out shape {list(y.dims)} should be the same")
    if x.format != y.format:
        raise invalid("self and out should have the same format")
    need_dims((x, "self"), (y, "out"))
    return Plan(lambda a: dtypes.convert(a, dtype), [x], [y])


@operator("InplaceCopy", flops=moves)
def inplace_copy(self_ref, src):
    dst, s = tensor(self_ref, "selfRef"), tensor(src, "src")
    types = REAL | COMPLEX
    need_dtype(dst, "selfRef", types)
    need_dtype(s, "src", types)
    need_dims((dst, "selfRef"), (s, "src"), lo=1)
    if broadcast(dst.dims, s.dims, "selfRef", "src") != dst.dims:
        raise invalid(f"src shape {list(s.dims)} cannot broadcast to selfRef {list(dst.dims)}")
    # no dtype relation: the copy converts any listed type to any other (float -> int
    # truncates, as Cast does); complex ones only into a contiguous selfRef
    if COMPLEX & {dtypes.short(s.dtype), dtypes.short(dst.dtype)} and not dst.is_contiguous():
        raise invalid("a complex copy needs a contiguous selfRef")
    return Plan(lambda a: a, [s], [dst])
