"""aclnnConvolution (ops-nn convolution_forward), forward (non-transposed) 1-D / 2-D /
3-D convolution with groups, stride, padding and dilation.

Docs' rules checked: input / weight / output FLOAT, FLOAT16 or BFLOAT16 in format NCL,
NCHW or NCDHW (3-5 dims, all three alike), bias nullptr or 1-D of out-channels, stride
and dilation one positive value per spatial dim, padding 1 or 2 values (1-D), 2 or 4
(2-D), 3 (3-D), groups in [1, 65535] with groups * weight C == input C, the output shape
of the inferred one, cubeMathType in 0..4. The simulated Ascend910B1's cube unit
computes FLOAT, so KEEP_DTYPE keeps f32 (the aclnn source rejects it only on SoCs
without f32 cube support); ALLOW_FP32_DOWN_PRECISION and USE_HF32 round FLOAT inputs to
HFLOAT32, modelled here as a 10-bit mantissa; USE_FP16 rounds them to f16.
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from cannops.native._aclnn import lib

from . import dtypes
from .aclnn import (Plan, as_compute, int_array, invalid, need_dims, need_dtype, operator,
                    promote, tensor)
from .runtime import SimError

F = {"f32", "f16", "bf16"}
KEEP_DTYPE, ALLOW_FP32_DOWN_PRECISION, USE_FP16, USE_HF32, USE_FP32_ADD = range(5)


def _formats():
    return {3: lib.ACL_FORMAT_NCL, 4: lib.ACL_FORMAT_NCHW, 5: lib.ACL_FORMAT_NCDHW}


def _round_mantissa(a: np.ndarray, bits: int) -> np.ndarray:
    """Round float32 values to `bits` explicit mantissa bits (nearest, ties to even)."""
    u = np.ascontiguousarray(a, np.float32).view(np.uint32)
    drop = 23 - bits
    bias = np.uint32((1 << (drop - 1)) - 1) + ((u >> np.uint32(drop)) & np.uint32(1))
    return ((u + bias) & np.uint32(~((1 << drop) - 1) & 0xFFFFFFFF)).view(np.float32)


def _pads(padding: tuple[int, ...], k: int) -> list[tuple[int, int]]:
    if k == 1 and len(padding) in (1, 2):
        return [(padding[0], padding[-1])]
    if k == 2 and len(padding) == 2:
        return [(p, p) for p in padding]
    if k == 2 and len(padding) == 4:
        return [(padding[0], padding[1]), (padding[2], padding[3])]
    if k == 3 and len(padding) == 3:
        return [(p, p) for p in padding]
    raise invalid(f"padding {list(padding)} has a wrong length for a {k}-D convolution")


def convolve(x, w, b, stride, pads, dilation, groups):
    """Cross-correlation as deep-learning frameworks define convolution; x (N, C, *S),
    w (O, C/groups, *K)."""
    k = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + pads)
    kernel = w.shape[2:]
    span = [dilation[i] * (kernel[i] - 1) + 1 for i in range(k)]
    win = sliding_window_view(xp, span, axis=tuple(range(2, 2 + k)))
    win = win[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in stride)
              + tuple(slice(None, None, d) for d in dilation)]
    n, c, o = x.shape[0], x.shape[1], w.shape[0]
    win = win.reshape((n, groups, c // groups) + win.shape[2:])
    wg = w.reshape((groups, o // groups, c // groups) + kernel)
    sp, ks = "abc"[:k], "xyz"[:k]
    out = np.einsum(f"ngc{sp}{ks},gfc{ks}->ngf{sp}", win, wg, optimize=True)
    out = out.reshape((n, o) + out.shape[3:])
    if b is not None:
        out = out + b.reshape((1, o) + (1,) * k)
    return out


@operator("Convolution")
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups, output, cube_math_type):
    x, w, y = tensor(input, "input"), tensor(weight, "weight"), tensor(output, "output")
    b = tensor(bias, "bias", optional=True)
    st, pad, dil = int_array(stride, "stride"), int_array(padding, "padding"), int_array(dilation, "dilation")
    int_array(output_padding, "outputPadding")   # must exist; ignored when not transposed
    for t, what in ((x, "input"), (w, "weight"), (y, "output")) + (((b, "bias"),) if b else ()):
        need_dtype(t, what, F)
    need_dims((x, "input"), (w, "weight"), (y, "output"), lo=3, hi=5)
    if not x.ndim == w.ndim == y.ndim:
        raise invalid(f"input, weight and output dims differ: {x.ndim}, {w.ndim}, {y.ndim}")
    fmt = _formats()[x.ndim]
    for t, what in ((x, "input"), (w, "weight"), (y, "output")):
        if t.format != fmt:
            raise invalid(f"{what} format {t.format} should be {fmt} for a {x.ndim}-D tensor")
    work = promote(x.dtype, w.dtype, "input", "weight")
    if cube_math_type not in range(5):
        raise invalid(f"cubeMathType {cube_math_type} should be in 0..4")
    if transposed:
        raise SimError(lib.ACLNN_ERR_INNER, "transposed convolution is not simulated")
    k = x.ndim - 2
    if len(st) != k or len(dil) != k or min(st + dil) < 1:
        raise invalid(f"stride {list(st)} / dilation {list(dil)}: {k} values > 0 expected")
    pads = _pads(pad, k)
    if min(p for pair in pads for p in pair) < 0:
        raise invalid(f"padding {list(pad)} has negative values")
    if not 1 <= groups <= 65535 or w.dims[1] * groups != x.dims[1] or w.dims[0] % groups:
        raise invalid(f"groups {groups}: weight {list(w.dims)} does not split input channels {x.dims[1]}")
    if b is not None and b.dims != (w.dims[0],):
        raise invalid(f"bias shape {list(b.dims)} should be [{w.dims[0]}]")
    spatial = []
    for i in range(k):
        size = x.dims[2 + i] + sum(pads[i])
        reach = dil[i] * (w.dims[2 + i] - 1) + 1
        if size < reach:
            raise invalid(f"padded input size {size} is smaller than the dilated kernel {reach}")
        spatial.append((size - reach) // st[i] + 1)
    expect = (x.dims[0], w.dims[0], *spatial)
    if y.dims != expect:
        raise invalid(f"output shape {list(y.dims)} should be {list(expect)}")

    def rounding(a):
        if dtypes.short(work) != "f32" or cube_math_type in (KEEP_DTYPE, USE_FP32_ADD):
            return a
        if cube_math_type == USE_FP16:
            return a.astype(np.float16).astype(np.float32)
        return _round_mantissa(a, 10)

    def compute(xa, wa, *ba):
        xc, wc = rounding(as_compute(xa, work)), rounding(as_compute(wa, work))
        return convolve(xc, wc, as_compute(ba[0], work) if ba else None, st, pads, dil, groups)

    return Plan(compute, [x, w] + ([b] if b else []), [y])
