"""Arithmetic aclnn operators (ops-math add / sub / mul / div / muls, and the in-place
forms InplaceAdds / InplaceSub / InplaceDiv): tensor-tensor ones
promote their inputs' types and broadcast their shapes (numpy rules, at most 8 dims);
tensor-scalar ones use the tensor-scalar promotion table and keep self's shape."""
from __future__ import annotations

import numpy as np

from . import dtypes
from .aclnn import (Plan, as_compute, broadcast, in_type, invalid, need_cast, need_dims, need_dtype,
                    operator, promote, scalar, tensor)
from .state import warn

TYPES = {"f32", "f16", "f64", "s32", "s64", "s16", "s8", "u8", "bool", "c128", "c64", "bf16"}


def binary_plan(self_p, other_p, out_p, fn, alpha_p=None):
    """Checks and plan of a tensor-tensor operator; in-place forms pass selfRef as out."""
    x, y, z = tensor(self_p, "self"), tensor(other_p, "other"), tensor(out_p, "out")
    for t, what in ((x, "self"), (y, "other"), (z, "out")):
        need_dtype(t, what, TYPES)
    need_dims((x, "self"), (y, "other"), (z, "out"))
    work = promote(x.dtype, y.dtype, "self", "other")
    need_cast(work, z.dtype, "promoted type -> out")
    shape = broadcast(x.dims, y.dims, "self", "other")
    if shape != z.dims:
        raise invalid(f"out shape {list(z.dims)} should be the broadcast shape {list(shape)}")
    alpha = 1.0
    if alpha_p is not None:
        a = scalar(alpha_p, "alpha")
        need_cast(a.dtype, work, "alpha -> promoted type")
        alpha = a.value
    # op_api: both cast to the deduced type, the kernel computes there, its result is cast to out
    return Plan(in_type(work, lambda a, b: fn(as_compute(a, work), as_compute(b, work), alpha)), [x, y], [z])


@operator("Add")
def add(self, other, alpha, out):
    return binary_plan(self, other, out, lambda a, b, k: a + k * b if k != 1 else a + b, alpha)


@operator("Sub")
def sub(self, other, alpha, out):
    return binary_plan(self, other, out, lambda a, b, k: a - k * b if k != 1 else a - b, alpha)


@operator("Mul")
def mul(self, other, out):
    return binary_plan(self, other, out, lambda a, b, _: a * b)


@operator("Div")
def div(self, other, out):
    return binary_plan(self, other, out, lambda a, b, _: np.true_divide(a, b))


def _tensor_scalar(self_p, other_p, out_p, fn, alpha_p=None, inplace=False, types=TYPES):
    x = tensor(self_p, "selfRef" if inplace else "self")
    z = x if inplace else tensor(out_p, "out")
    o = scalar(other_p, "other")
    need_dtype(x, "self", types)
    need_dtype(z, "out", types)
    need_dims((x, "self"), (z, "out"))
    work = dtypes.promote_scalar(x.dtype, o.dtype)
    if work is None:
        raise invalid(f"self dtype {dtypes.name(x.dtype)} and other dtype "
                      f"{dtypes.name(o.dtype)} cannot be promoted")
    need_cast(work, z.dtype, "promoted type -> out")
    if z.dims != x.dims:
        raise invalid(f"out shape {list(z.dims)} should equal self shape {list(x.dims)}")
    alpha = 1.0
    if alpha_p is not None:
        a = scalar(alpha_p, "alpha")
        need_cast(a.dtype, work, "alpha -> promoted type")
        alpha = a.value
    # the scalar is converted to the promoted type, then computed with like the tensor
    other = dtypes.convert(np.asarray(o.value), work).astype(dtypes.compute_dtype(work))
    return Plan(in_type(work, lambda a: fn(as_compute(a, work), other, alpha)), [x], [z])


@operator("Muls")
def muls(self, other, out):
    return _tensor_scalar(self, other, out, lambda a, s, _: a * s)


@operator("Adds")
def adds(self, other, alpha, out):
    return _tensor_scalar(self, other, out, lambda a, s, k: a + k * s, alpha)


@operator("InplaceAdds")
def inplace_adds(self_ref, other, alpha):
    # its page (not Adds') lists no complex type for selfRef, and asks other > 0, which
    # op_api does not check (nor Adds' page ask): taken, with a warning
    value = scalar(other, "other").value
    if not isinstance(value, complex) and not value > 0:
        warn(f"aclnnInplaceAdds: other {value:g} is not > 0, the range its page gives "
             "(op_api checks no value: computed as given)")
    return _tensor_scalar(self_ref, other, None, lambda a, s, k: a + k * s, alpha, inplace=True,
                          types=TYPES - {"c64", "c128"})


@operator("InplaceSub")
def inplace_sub(self_ref, other, alpha):
    """selfRef -= alpha * other: other broadcasts to selfRef's shape, the deduced type
    converts to selfRef's (its page's rules are Sub's, with out = selfRef)."""
    return binary_plan(self_ref, other, self_ref, lambda a, b, k: a - k * b if k != 1 else a - b, alpha)


@operator("InplaceDiv")
def inplace_div(self_ref, other):
    """selfRef /= other, with Div's types and broadcasting, out = selfRef."""
    return binary_plan(self_ref, other, self_ref, lambda a, b, _: np.true_divide(a, b))
