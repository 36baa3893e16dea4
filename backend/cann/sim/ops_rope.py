"""aclnn operators of the RoPE family: the in-place scalar arithmetic of ops-math (Subs, Divs,
Muls), ops-nn's Threshold and ops-math's ClampMax (in place), RepeatInterleaveIntWithDim and
ops-transformer's RotaryPositionEmbedding (IndexSelect is MUL_MAT_ID's, ops_moe.py).

RotaryPositionEmbedding, as its page documents it for Atlas A2 / A3:
  y = x * cos + rotate(x) * sin, rotate = cat(-x2, x1) of the two halves of the last dim
  (mode 0, "half") or of its even / odd elements, re-interleaved (mode 1, "interleave").
  x, cos, sin, out: FLOAT16, BFLOAT16 or FLOAT32 alike, ND, 3 or 4 dims; x may be strided,
  out not. x and out have one shape, cos and sin another; their last dim D is shared, even
  and < 896. Layouts BNSD / BSND / SBND (TND for 3 dims): cos may broadcast over B and N
  (half: 11SD, B1SD, BNSD and the BSND / SBND equivalents, with B, N < 1000); interleave
  takes only the S dim in cos (11SD, 1S1D, S11D) and needs B * N < 1000.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from .aclnn import (Plan, as_compute, invalid, need_cast, need_contiguous, need_dims, need_dtype,
                    need_same_dtype, need_same_shape, operator, scalar, tensor)
from .cost import moves, per_element
from .ops_binary import _tensor_scalar

FLOATS = {"f16", "f32", "bf16"}


# ----------------------------------------------------- in-place scalar arithmetic ----

@operator("InplaceSubs")
def inplace_subs(self_ref, other, alpha):
    """selfRef = selfRef - alpha * other."""
    return _tensor_scalar(self_ref, other, None, lambda a, s, k: a - k * s, alpha, inplace=True)


@operator("InplaceDivs")
def inplace_divs(self_ref, other):
    """selfRef = selfRef / other (true division)."""
    return _tensor_scalar(self_ref, other, None, lambda a, s, _: np.true_divide(a, s), inplace=True)


@operator("InplaceMuls")
def inplace_muls(self_ref, other):
    return _tensor_scalar(self_ref, other, None, lambda a, s, _: a * s, inplace=True)


THRESHOLD_TYPES = {"f32", "f16", "bf16", "s8", "u8", "s16", "s32", "s64"}   # no DOUBLE on A2 / A3


@operator("InplaceThreshold")
def inplace_threshold(self_ref, threshold, value):
    """selfRef = selfRef where selfRef > threshold, else value."""
    x = tensor(self_ref, "selfRef")
    th, v = scalar(threshold, "threshold"), scalar(value, "value")
    need_dtype(x, "selfRef", THRESHOLD_TYPES)
    for s, what in ((th, "threshold"), (v, "value")):   # the tensor-tensor deduction table
        if dtypes.promote(x.dtype, s.dtype) is None:
            raise invalid(f"selfRef dtype {dtypes.name(x.dtype)} and {what} dtype "
                          f"{dtypes.name(s.dtype)} cannot be deduced")
    need_dims((x, "selfRef"))
    work = dtypes.compute_dtype(x.dtype)
    t, fill = work.type(th.value), work.type(v.value)
    return Plan(lambda a: np.where(as_compute(a, x.dtype) > t, as_compute(a, x.dtype), fill), [x], [x])


@operator("InplaceClampMax")
def inplace_clamp_max(self_ref, clip_value_max):
    """selfRef = min(selfRef, max)."""
    x = tensor(self_ref, "selfRef")
    hi = scalar(clip_value_max, "clipValueMax")
    need_dtype(x, "selfRef", {"f32", "f16", "f64", "bf16", "s8", "s16", "s32", "s64", "u8"})
    work = dtypes.promote_scalar(x.dtype, hi.dtype)   # TensorScalar deduction, back into selfRef
    if work is None:
        raise invalid(f"selfRef dtype {dtypes.name(x.dtype)} and clipValueMax dtype "
                      f"{dtypes.name(hi.dtype)} cannot be deduced")
    need_cast(work, x.dtype, "deduced type -> selfRef")
    need_dims((x, "selfRef"))
    return Plan(lambda a: np.minimum(as_compute(a, x.dtype), hi.value), [x], [x])


# ------------------------------------------------------------------ repetition ----

@operator("RepeatInterleaveIntWithDim", flops=moves)
def repeat_interleave_int_with_dim(self, repeats, dim, output_size, out):
    """Each element along dim repeated `repeats` times in place (torch.repeat_interleave);
    outputSize is the length of that dim in out, self.shape[dim] * repeats."""
    x, y = tensor(self, "self"), tensor(out, "out")
    need_dtype(x, "self", {"u8", "s8", "s16", "s32", "s64", "bool", "f16", "f32", "bf16"})
    need_same_dtype(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"), hi=8)
    if repeats < 0:
        raise invalid(f"repeats {repeats} should be >= 0")
    n = max(x.ndim, 1)
    if not -n <= dim < n:
        raise invalid(f"dim {dim} should be in [{-n}, {n})")
    d = dim % n
    if output_size != x.dims[d] * repeats:
        raise invalid(f"outputSize {output_size} should be self.shape[{d}] * repeats = {x.dims[d] * repeats}")
    expect = tuple(output_size if i == d else s for i, s in enumerate(x.dims))
    if y.dims != expect:
        raise invalid(f"out shape {list(y.dims)} should be {list(expect)}")
    return Plan(lambda a: np.repeat(a, repeats, axis=d), [x], [y])


# ------------------------------------------------------------------- rotation ----

def _layout_ok(x_dims, c_dims, mode) -> str | None:
    """None when cos's leading dims fit one documented layout of x, else why not."""
    lead_x, lead_c = x_dims[:-1], c_dims[:-1]
    carried = [i for i, (a, b) in enumerate(zip(lead_x, lead_c)) if b != 1]
    if any(lead_c[i] != lead_x[i] for i in carried):
        return f"cos leading dims {list(lead_c)} do not broadcast to x's {list(lead_x)}"
    if len(lead_x) == 2:                       # TND: cos T1D or TND
        return None if lead_c[0] in (1, lead_x[0]) else "cos should be T1D or TND"
    if mode == 1:
        # interleave: cos holds the S dim only (11SD, 1S1D, S11D); B * N < 1000
        if len(carried) > 1:
            return f"interleave mode takes cos 11SD / 1S1D / S11D, not {list(c_dims)}"
        s = carried[0] if carried else None
        others = [n for i, n in enumerate(lead_x) if i != s] if s is not None else lead_x[1:]
        bn = int(np.prod(others))
        return None if bn < 1000 else f"interleave mode needs B * N < 1000, got {bn}"
    if len(carried) == 2 and carried == [1, 2]:  # "1NS"/"1SN": no layout has it
        return f"cos {list(c_dims)} fits no layout of x {list(x_dims)}"
    big = [n for i, n in enumerate(lead_x) if i not in carried and n >= 1000]
    return None if not big else f"half mode needs B, N < 1000, got {big}"


@operator("RotaryPositionEmbedding", flops=per_element(3))
def rotary_position_embedding(x_p, cos_p, sin_p, mode, out_p):
    x, c, s, y = tensor(x_p, "x"), tensor(cos_p, "cos"), tensor(sin_p, "sin"), tensor(out_p, "out")
    for t, what in ((x, "x"), (c, "cos"), (s, "sin"), (y, "out")):
        need_dtype(t, what, FLOATS)
    for t, what in ((c, "cos"), (s, "sin"), (y, "out")):
        need_same_dtype(x, t, "x", what)
    need_dims((x, "x"), (c, "cos"), (s, "sin"), (y, "out"), lo=3, hi=4)
    need_contiguous(y, "out")
    need_same_shape(x, y, "x", "out")
    need_same_shape(c, s, "cos", "sin")
    if c.ndim != x.ndim:
        raise invalid(f"cos has {c.ndim} dims, x {x.ndim}")
    if mode not in (0, 1):
        raise invalid(f"mode {mode} should be 0 (half) or 1 (interleave) on this SoC")
    d = x.dims[-1]
    if c.dims[-1] != d or d % 2 or d >= 896:
        raise invalid(f"D = {d} (cos {c.dims[-1]}) should be shared, even and < 896")
    why = _layout_ok(x.dims, c.dims, mode)
    if why:
        raise invalid(why)

    def compute(xa, ca, sa):
        v = as_compute(xa, x.dtype)
        if mode == 0:
            x1, x2 = v[..., :d // 2], v[..., d // 2:]
            rot = np.concatenate([-x2, x1], axis=-1)
        else:
            rot = np.empty_like(v)
            rot[..., 0::2], rot[..., 1::2] = -v[..., 1::2], v[..., 0::2]
        return v * as_compute(ca, c.dtype) + rot * as_compute(sa, s.dtype)
    return Plan(compute, [x, c, s], [y])
