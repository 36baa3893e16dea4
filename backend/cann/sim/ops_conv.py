"""aclnnConvolution (ops-nn convolution_forward): 1-D / 2-D / 3-D convolution with groups,
stride, padding and dilation, forward and transposed; and two small operators that
ggml-cann's transposed 1-D convolution calls around it, aclnnSlice and aclnnInplaceZero.

Docs' rules checked: input / weight / output FLOAT, FLOAT16 or BFLOAT16 in format NCL,
NCHW or NCDHW (3-5 dims, all three alike), bias nullptr or 1-D of out-channels, stride
and dilation one positive value per spatial dim, padding 1 or 2 values (1-D; exactly 1
when transposed), 2 or 4 (2-D), 3 (3-D), groups in [1, 65535] with groups * weight C ==
input C, the output shape of the inferred one, cubeMathType in 0..4. The simulated
Ascend910B1's cube unit computes FLOAT, so KEEP_DTYPE keeps f32 (the aclnn source rejects
it only on SoCs without f32 cube support); ALLOW_FP32_DOWN_PRECISION and USE_HF32 round
FLOAT inputs to HFLOAT32 (910B: 11 mantissa bits); USE_FP16 rounds them to f16 and the
kernel's output is f16 (op_api's UpdateOutputDtype), cast to output after (cube.Cube).

Transposed (Atlas A2/A3 rules): weight is (C_in, C_out / groups, *K) and the output has
weight.shape[1] * groups channels; the output size per spatial dim is
(in - 1) * stride - 2 * padding + dilation * (K - 1) + outputPadding + 1; outputPadding
has one value per spatial dim, each >= 0 and below that dim's stride or dilation; input
and output dtypes are equal; the kernel's L (1-D) or H and W (2-D, 3-D) are in [1, 255]
and dilations in [1, 255].
"""
from __future__ import annotations

import numpy as np

from .binding import lib

from . import dtypes
from .aclnn import (Plan, need_nd, as_compute, int_array, invalid, need_dims, need_dtype, need_same_dtype,
                    operator, promote, tensor)
from .cost import CUBE, elements, moves
from .cube import cube_of

F = {"f32", "f16", "bf16"}


def _formats():
    return {3: lib.ACL_FORMAT_NCL, 4: lib.ACL_FORMAT_NCHW, 5: lib.ACL_FORMAT_NCDHW}


def _pads(padding: tuple[int, ...], k: int, transposed: bool = False) -> list[tuple[int, int]]:
    if k == 1 and (len(padding) == 1 or (len(padding) == 2 and not transposed)):
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
    w (O, C/groups, *K): one matmul per kernel tap, over a strided window of the padded
    input (im2col a tap at a time, so memory stays the input's size)."""
    k = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + pads)
    kernel = w.shape[2:]
    out_size = [(xp.shape[2 + i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(k)]
    n, c, o = x.shape[0], x.shape[1], w.shape[0]
    xg = xp.reshape((n, groups, c // groups) + xp.shape[2:])
    wg = w.reshape((groups, o // groups, c // groups) + kernel)
    out = np.zeros((n, groups, o // groups, int(np.prod(out_size))), np.result_type(x, w))
    for tap in np.ndindex(*kernel):
        win = tuple(slice(t * d, t * d + (m - 1) * s + 1, s)
                    for t, d, m, s in zip(tap, dilation, out_size, stride))
        out += wg[(Ellipsis,) + tap] @ xg[(slice(None),) * 3 + win].reshape(n, groups, c // groups, -1)
    out = out.reshape((n, o) + tuple(out_size))
    if b is not None:
        out = out + b.reshape((1, o) + (1,) * k)
    return out


def convolve_transposed(x, w, b, stride, pads, dilation, output_padding, groups):
    """The transpose of convolve: each input sample scatters its kernel into the output,
    full[n, o, i*stride + k*dilation] += x[n, c, i] * w[c, o, k] within a group, then the
    padding is cut from both ends (outputPadding adds zeros-fed samples at the end);
    x (N, C, *S), w (C, O/groups, *K)."""
    k = x.ndim - 2
    n, c, spatial, kernel = x.shape[0], x.shape[1], x.shape[2:], w.shape[2:]
    f = w.shape[1]
    full_size = [(spatial[i] - 1) * stride[i] + dilation[i] * (kernel[i] - 1) + 1 + output_padding[i]
                 for i in range(k)]
    xg = x.reshape((n, groups, c // groups) + spatial)
    wg = w.reshape((groups, c // groups, f) + kernel)
    full = np.zeros((n, groups, f) + tuple(full_size), np.result_type(x, w))
    for tap in np.ndindex(*kernel):
        win = tuple(slice(t * d, t * d + (size - 1) * s + 1, s)
                    for t, d, size, s in zip(tap, dilation, spatial, stride))
        full[(slice(None),) * 3 + win] += np.einsum("ngc...,gcf->ngf...", xg, wg[(Ellipsis,) + tap],
                                                   optimize=True)
    crop = tuple(slice(lo, size - hi) for (lo, hi), size in zip(pads, full_size))
    out = full[(slice(None),) * 3 + crop].reshape((n, groups * f) + full[(0, 0, 0) + crop].shape)
    if b is not None:
        out = out + b.reshape((1, groups * f) + (1,) * k)
    return out


def _output_size(x, w, st, pads, dil, out_pad, transposed) -> list[int]:
    """The inferred spatial output shape (the docs' formulas)."""
    size = []
    for i in range(x.ndim - 2):
        reach = dil[i] * (w.dims[2 + i] - 1) + 1
        if transposed:
            size.append((x.dims[2 + i] - 1) * st[i] - sum(pads[i]) + reach + out_pad[i])
            continue
        padded = x.dims[2 + i] + sum(pads[i])
        if padded < reach:
            raise invalid(f"padded input size {padded} is smaller than the dilated kernel {reach}")
        size.append((padded - reach) // st[i] + 1)
    return size


def _check_transposed(x, w, y, b, st, dil, out_pad, groups) -> None:
    k = x.ndim - 2
    if x.dtype != y.dtype:
        raise invalid(f"input dtype {dtypes.name(x.dtype)} and output dtype {dtypes.name(y.dtype)} "
                      "should be the same when transposed")
    if len(out_pad) != k or any(not (0 <= p and (p < s or p < d)) for p, s, d in zip(out_pad, st, dil)):
        raise invalid(f"outputPadding {list(out_pad)}: {k} values, each >= 0 and below its "
                      f"stride {list(st)} or dilation {list(dil)}")
    # Atlas A2/A3: transposed kernels L (1-D) or H, W (2-D, 3-D) and dilations in [1, 255]
    for i in range(max(0, k - 2), k):
        if not 1 <= w.dims[2 + i] <= 255:
            raise invalid(f"transposed weight spatial dim {w.dims[2 + i]} should be in [1, 255]")
    if max(dil) > 255:
        raise invalid(f"transposed dilation {list(dil)} should be in [1, 255]")
    if not 1 <= groups <= 65535 or w.dims[0] != x.dims[1] or x.dims[1] % groups:
        raise invalid(f"groups {groups}: weight {list(w.dims)} does not match input channels {x.dims[1]}")
    if b is not None and b.dims != (w.dims[1] * groups,):
        raise invalid(f"bias shape {list(b.dims)} should be [{w.dims[1] * groups}]")


MAX_DIM, MAX_PAD = 1_000_000, 255


def _check_limits(x, w, b, pads, transposed: bool) -> None:
    """The 约束说明 table (A2 / A3 and the 310P): every dim of input, weight and bias at most
    1,000,000; a forward conv1d / conv2d pads by at most 255, a forward conv3d its H and W."""
    for t, what in ((x, "input"), (w, "weight")) + (((b, "bias"),) if b else ()):
        if t.dims and max(t.dims) > MAX_DIM:
            raise invalid(f"{what} dims {list(t.dims)}: each should be at most {MAX_DIM:,}")
    bounded = pads if len(pads) < 3 else pads[1:]
    if not transposed and max((p for pair in bounded for p in pair), default=0) > MAX_PAD:
        raise invalid(f"forward padding {[list(p) for p in pads]} should be in [0, {MAX_PAD}] "
                      f"(H and W only for conv3d)")


def convolution_flops(plan) -> int:
    """2 per multiply-add: each element of the output (transposed: of the input) takes one
    filter's worth, weight [C, C'/groups, k...] -> |C'/groups·k...|."""
    x, w, y = plan.inputs[0], plan.inputs[1], plan.outputs[0]
    side = x if plan.sizes.get("transposed") else y
    return 2 * elements(side) * elements(w) // w.dims[0]


@operator("Convolution", unit=CUBE, flops=convolution_flops)
def convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups, output, cube_math_type):
    x, w, y = tensor(input, "input"), tensor(weight, "weight"), tensor(output, "output")
    b = tensor(bias, "bias", optional=True)
    st, pad, dil = int_array(stride, "stride"), int_array(padding, "padding"), int_array(dilation, "dilation")
    out_pad = int_array(output_padding, "outputPadding")   # must exist; ignored when not transposed
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
    for t, what in ((y, "output"),) + (((b, "bias"),) if b else ()):   # the page: the deduced type
        if t.dtype != work:
            raise invalid(f"{what} dtype {dtypes.name(t.dtype)} should be the deduced type "
                          f"{dtypes.name(work)} of input and weight")
    if cube_math_type not in range(5):
        raise invalid(f"cubeMathType {cube_math_type} should be in 0..4")
    k = x.ndim - 2
    if len(st) != k or len(dil) != k or min(st + dil) < 1:
        raise invalid(f"stride {list(st)} / dilation {list(dil)}: {k} values > 0 expected")
    pads = _pads(pad, k, transposed)
    if min(p for pair in pads for p in pair) < 0:
        raise invalid(f"padding {list(pad)} has negative values")
    _check_limits(x, w, b, pads, transposed)
    if transposed:
        _check_transposed(x, w, y, b, st, dil, out_pad, groups)
        out_channels = w.dims[1] * groups
    else:
        if not 1 <= groups <= 65535 or w.dims[1] * groups != x.dims[1] or w.dims[0] % groups:
            raise invalid(f"groups {groups}: weight {list(w.dims)} does not split input channels {x.dims[1]}")
        if b is not None and b.dims != (w.dims[0],):
            raise invalid(f"bias shape {list(b.dims)} should be [{w.dims[0]}]")
        out_channels = w.dims[0]
    expect = (x.dims[0], out_channels, *_output_size(x, w, st, pads, dil, out_pad, transposed))
    if y.dims != expect:
        raise invalid(f"output shape {list(y.dims)} should be {list(expect)}")

    cube = cube_of(work, cube_math_type)   # the SoC's cube (cube.py)

    def compute(xa, wa, *ba):
        xc, wc = cube.operand(as_compute(xa, work)), cube.operand(as_compute(wa, work))
        bc = as_compute(ba[0], work) if ba else None
        if transposed:
            return convolve_transposed(xc, wc, bc, st, pads, dil, out_pad, groups)
        return convolve(xc, wc, bc, st, pads, dil, groups)

    return Plan(cube.result(compute), [x, w] + ([b] if b else []), [y],
                sizes={"transposed": bool(transposed)})


# ---------------------------------------------- Slice and InplaceZero ----
# (aclnn_slice.h, aclnn_zero.h: ND tensors of up to 8 dims)

SLICE_TYPES = {"f32", "f16", "bf16", "s32", "s64", "s8", "u8", "bool"}
ZERO_TYPES = {"s8", "s16", "s32", "s64", "u8", "u16", "f16", "f32", "f64", "bf16", "bool", "c64", "c128"}


@operator("Slice", flops=moves)
def slice_(self, dim, start, end, step, out):
    """out = self[start:end:step] along dim; start / end outside [0, N) are clamped as the
    docs' formulas say, and out's shape must be the inferred one."""
    x, y = tensor(self, "self"), tensor(out, "out")
    need_dtype(x, "self", SLICE_TYPES)
    need_same_dtype(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"), lo=1, hi=8)
    need_nd((x, "self"), (y, "out"))
    if not -x.ndim <= dim < x.ndim:
        raise invalid(f"dim {dim} should be in [{-x.ndim}, {x.ndim - 1}]")
    if step <= 0:
        raise invalid(f"step {step} should be > 0")
    d, n = dim % x.ndim, x.dims[dim % x.ndim]
    lo = 0 if start < -n else n if start >= n else (start + n) % n
    hi = n if end >= n else lo if (end + n) % n < lo else (end + n) % n
    expect = x.dims[:d] + ((hi - lo + step - 1) // step,) + x.dims[d + 1:]
    if y.dims != expect:
        raise invalid(f"out shape {list(y.dims)} should be {list(expect)}")
    index = (slice(None),) * d + (slice(lo, hi, step),)
    return Plan(lambda a: a[index], [x], [y])


@operator("InplaceZero", flops=moves)
def inplace_zero(self_ref):
    t = tensor(self_ref, "selfRef")
    need_dtype(t, "selfRef", ZERO_TYPES)
    need_nd((t, "selfRef"))
    return Plan(lambda: np.zeros(t.dims, t.np_dtype), [], [t])
