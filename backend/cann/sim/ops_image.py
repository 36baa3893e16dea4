"""aclnnIm2col (ops-math conversion/im2col), aclnnAvgPool2d, aclnnMaxPool (ops-nn pooling)
and aclnnUpsampleNearest2d (ops-cv image/resize_nearest_neighbor_v2), from their docs.

Docs' rules checked, per operator:
* Im2col: self FLOAT / FLOAT16 / BFLOAT16 (Atlas A2/A3), ND, 3 or 4 dims (C, H, W) /
  (N, C, H, W) with every dim > 0; kernelSize, dilation, padding, stride of 2 values (H, W),
  kernelSize / dilation / stride > 0, padding >= 0; out of the inferred shape (C*kh*kw, L) /
  (N, C*kh*kw, L), L the product of the output sizes; out's dtype from the same list (the
  result is cast to it).
* AvgPool2d: self / out FLOAT / FLOAT16 / BFLOAT16, NCHW or NCL, 3-4 dims, same dtype and
  format; kernelSize 1 or 2 values > 0; strides 0 (= kernel), 1 or 2 values > 0; paddings 1
  or 2 values >= 0 and at most half the kernel; the output shape (floor, or ceil mode with
  the last window starting inside the padded image); cubeMathType 0 (KEEP_DTYPE), or 2
  (USE_FP16) unless BFLOAT16; 1 (ALLOW_FP32_DOWN_PRECISION) is refused for FLOAT on A2/A3,
  3 (USE_HF32) always. Divisor: divisorOverride when not 0, else the window clipped to the
  padded image (countIncludePad) or the number of values inside the image.
* MaxPool: self FLOAT16 / FLOAT (A2/A3), ND, 3-4 dims, out of self's dtype, format and dims;
  kernelShape 1 or 2 values > 0; strides 0 (= 1), 1 or 2 values > 0; autoPad 0 (NOTSET)
  only; pads 0, 1, 2 (H, W) or 4 (top, left, bottom, right) values with each axis' sum at
  most its kernel; dilations 0, 1, 2 or 4 values, all 1; padded positions never win.
* UpsampleNearest2d: self / out FLOAT / BFLOAT16 / FLOAT16 / DOUBLE / UINT8, NCHW or NHWC,
  4 dims, same dtype and format, N and C equal, outputSize 2 non-zero values equal to out's
  H and W, no dim above 2^20; src = min(floor(dst * in / out), in - 1) per axis, in f32.
* UpsampleBilinear2d (ops-cv image/upsample_bilinear2d): self / out FLOAT / BFLOAT16 /
  FLOAT16 / DOUBLE (DOUBLE in NHWC only), NCHW or NHWC, 4 dims, same dtype and format, N and
  C equal; outputSize 2 values > 0; scalesH / scalesW >= 0, and when > 0 outputSize =
  floor(self * scale). Source coordinate x * (in-1)/(out-1) (alignCorners; refused for an
  output size of 1, where the page's formula divides by 0) or max(0, (x+0.5) * scale - 0.5)
  with scale 1/scales (or in/out when 0); the two neighbours weighted linearly, the one past
  the edge clamped to it.
"""
from __future__ import annotations

import math

import numpy as np

from .binding import lib

from . import dtypes
from .aclnn import (Plan, need_nd, as_compute, in_type, int_array, invalid, need_dims, need_dtype,
                    need_same_dtype, operator, tensor)
from .cost import moves
from .state import soc_family

F = {"f32", "f16", "bf16"}


def _positive(values, what: str, lengths: tuple[int, ...], allow_zero: bool = False):
    if len(values) not in lengths:
        raise invalid(f"{what} has {len(values)} values, should have {' or '.join(map(str, lengths))}")
    if any(v < 0 or (v == 0 and not allow_zero) for v in values):
        raise invalid(f"{what} {list(values)} should be {'>= 0' if allow_zero else '> 0'}")
    return tuple(values)


def _pair(values: tuple[int, ...], default: int) -> tuple[int, int]:
    """(H, W) from 0, 1 or 2 values."""
    if not values:
        return default, default
    return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])


def _windows(x: np.ndarray, axis: int, k: int, s: int, n_out: int) -> np.ndarray:
    """axis -> (n_out, k): window o covers positions o*s .. o*s + k - 1."""
    idx = np.arange(n_out)[:, None] * s + np.arange(k)[None, :]
    return np.take(x, idx, axis=axis)


# ------------------------------------------------------------------ Im2col ----

@operator("Im2col", flops=moves)
def im2col(self, kernel_size, dilation, padding, stride, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    k = _positive(int_array(kernel_size, "kernelSize"), "kernelSize", (2,))
    d = _positive(int_array(dilation, "dilation"), "dilation", (2,))
    p = _positive(int_array(padding, "padding"), "padding", (2,), allow_zero=True)
    s = _positive(int_array(stride, "stride"), "stride", (2,))
    need_dtype(x, "self", F)
    need_dtype(y, "out", F)
    need_dims((x, "self"), lo=3, hi=4)
    need_nd((x, "self"), (y, "out"))
    if min(x.dims) <= 0:
        raise invalid(f"self shape {list(x.dims)} has a dim <= 0")
    h, w = x.dims[-2:]
    oh = (h + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    ow = (w + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    if oh <= 0 or ow <= 0:
        raise invalid(f"kernel {list(k)} (dilation {list(d)}) does not fit the padded {h}x{w} image")
    expect = x.dims[:-3] + (x.dims[-3] * k[0] * k[1], oh * ow)
    if y.dims != expect:
        raise invalid(f"out shape {list(y.dims)} should be {list(expect)}")

    def compute(a):
        batch = a.reshape((-1,) + a.shape[-3:])                    # (N, C, H, W)
        xp = np.pad(batch, [(0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])])
        hi = np.arange(k[0])[:, None] * d[0] + np.arange(oh)[None, :] * s[0]   # (kh, OH)
        wi = np.arange(k[1])[:, None] * d[1] + np.arange(ow)[None, :] * s[1]   # (kw, OW)
        win = xp[:, :, hi[:, None, :, None], wi[None, :, None, :]]  # (N, C, kh, kw, OH, OW)
        return win.reshape(y.dims)
    return Plan(compute, [x], [y])


# ------------------------------------------------------------------ pooling ----

def _pool_out(size: int, k: int, s: int, lo: int, hi: int, ceil: bool, drop: bool) -> int:
    """Output size over `size` padded by (lo, hi), floor or ceil; with `drop`, a last window
    that would start in the trailing padding or beyond is dropped."""
    span = size + lo + hi - k
    n = (-(-span // s) if ceil else span // s) + 1
    if drop and (n - 1) * s >= size + lo:
        n -= 1
    return n


@operator("AvgPool2d")
def avg_pool2d(self, kernel_size, strides, paddings, ceil_mode, count_include_pad,
               divisor_override, cube_math_type, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    k = _pair(_positive(int_array(kernel_size, "kernelSize"), "kernelSize", (1, 2)), 1)
    s_vals = _positive(int_array(strides, "strides"), "strides", (0, 1, 2))
    s = _pair(s_vals, 0) if s_vals else k
    p = _pair(_positive(int_array(paddings, "paddings"), "paddings", (1, 2), allow_zero=True), 0)
    need_dtype(x, "self", F)
    need_same_dtype(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"), lo=3, hi=4)
    if x.format not in (lib.ACL_FORMAT_NCHW, lib.ACL_FORMAT_NCL) or y.format != x.format:
        raise invalid(f"self / out formats {x.format} / {y.format} should be one of NCHW, NCL, alike")
    if 2 * p[0] > k[0] or 2 * p[1] > k[1]:
        raise invalid(f"paddings {list(p)} exceed half of kernelSize {list(k)}")
    if divisor_override < 0:
        raise invalid(f"divisorOverride {divisor_override} is negative")
    short = dtypes.short(x.dtype)
    on_310p = soc_family() == "310P"
    # its page: on the Atlas inference series "0：KEEP_DTYPE ... 当输入数据类型为FLOAT32时不支持"
    # (ggml-cann's ASCEND_310P branch passes 1 there); on A2 / A3 1 is refused for FLOAT
    if cube_math_type == 0 and short == "f32" and on_310p:
        raise invalid("cubeMathType 0 (KEEP_DTYPE) is not supported for FLOAT on the Atlas inference series")
    if cube_math_type == 1 and short == "f32" and not on_310p:
        raise invalid("cubeMathType 1 (ALLOW_FP32_DOWN_PRECISION) is not supported for FLOAT on Atlas A2/A3")
    if cube_math_type == 2 and short == "bf16":
        raise invalid("cubeMathType 2 (USE_FP16) is not supported for BFLOAT16")
    if cube_math_type not in (0, 1, 2):
        raise invalid(f"cubeMathType {cube_math_type} is not supported")
    h, w = x.dims[-2:]
    oh = _pool_out(h, k[0], s[0], p[0], p[0], ceil_mode, ceil_mode)
    ow = _pool_out(w, k[1], s[1], p[1], p[1], ceil_mode, ceil_mode)
    if oh <= 0 or ow <= 0 or y.dims != x.dims[:-2] + (oh, ow):
        raise invalid(f"out shape {list(y.dims)} should be {list(x.dims[:-2] + (oh, ow))}")
    # FLOAT16 arithmetic under USE_FP16, and for FLOAT on the 310P's cube under mode 1
    down = cube_math_type == 2 or (cube_math_type == 1 and on_310p)
    work = dtypes.BY_NAME["f16"] if down else x.dtype

    def divisors(size, kk, ss, pp, n):
        start = np.arange(n) * ss - pp
        whole = np.minimum(start + kk, size + pp) - start            # clipped to the padded image
        inside = np.minimum(start + kk, size) - np.maximum(start, 0)
        return whole, inside

    def compute(a):
        xa = as_compute(a, work)   # window sums and the division in f32
        # windows reaching past the padded image (ceil mode) read zeros there
        extra_h = max((oh - 1) * s[0] + k[0] - (h + 2 * p[0]), 0)
        extra_w = max((ow - 1) * s[1] + k[1] - (w + 2 * p[1]), 0)
        pads = [(0, 0)] * (xa.ndim - 2) + [(p[0], p[0] + extra_h), (p[1], p[1] + extra_w)]
        xp = np.pad(xa, pads)
        total = _windows(_windows(xp, -1, k[1], s[1], ow), -3, k[0], s[0], oh).sum(axis=(-3, -1))
        if divisor_override:
            div = np.float32(divisor_override)
        else:
            wh, ih = divisors(h, k[0], s[0], p[0], oh)
            ww, iw = divisors(w, k[1], s[1], p[1], ow)
            div = (np.outer(wh, ww) if count_include_pad else np.outer(ih, iw)).astype(np.float32)
        return total / div
    return Plan(in_type(work, compute), [x], [y])


@operator("MaxPool")
def max_pool(self, kernel_shape, strides, auto_pad, pads, dilations, ceil_mode, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    k = _pair(_positive(int_array(kernel_shape, "kernelShape"), "kernelShape", (1, 2)), 1)
    s = _pair(_positive(int_array(strides, "strides"), "strides", (0, 1, 2)), 1)
    pv = _positive(int_array(pads, "pads"), "pads", (0, 1, 2, 4), allow_zero=True)
    # (top, bottom), (left, right)
    if len(pv) == 4:
        ph, pw = (pv[0], pv[2]), (pv[1], pv[3])
    else:
        a, b = _pair(pv, 0)
        ph, pw = (a, a), (b, b)
    dil = int_array(dilations, "dilations")
    if len(dil) not in (0, 1, 2, 4) or any(v != 1 for v in dil):
        raise invalid(f"dilations {list(dil)}: 0, 1, 2 or 4 values, all 1")
    if auto_pad != 0:
        raise invalid(f"autoPad {auto_pad}: only 0 (NOTSET) is supported")
    need_dtype(x, "self", {"f32", "f16"})
    need_same_dtype(x, y, "self", "out")
    need_dims((x, "self"), lo=3, hi=4)
    need_nd((x, "self"), (y, "out"))
    if sum(ph) > k[0] or sum(pw) > k[1]:
        raise invalid(f"pads {list(pv)}: each axis' padding should be at most its kernel {list(k)}")
    h, w = x.dims[-2:]
    oh = _pool_out(h, k[0], s[0], ph[0], ph[1], bool(ceil_mode), True)
    ow = _pool_out(w, k[1], s[1], pw[0], pw[1], bool(ceil_mode), True)
    if oh <= 0 or ow <= 0 or y.dims != x.dims[:-2] + (oh, ow):
        raise invalid(f"out shape {list(y.dims)} should be {list(x.dims[:-2] + (oh, ow))}")

    def compute(a):
        xa = np.asarray(a)   # a maximum is exact in the input's type
        extra_h = max((oh - 1) * s[0] + k[0] - (h + sum(ph)), 0)
        extra_w = max((ow - 1) * s[1] + k[1] - (w + sum(pw)), 0)
        pads_ = [(0, 0)] * (xa.ndim - 2) + [(ph[0], ph[1] + extra_h), (pw[0], pw[1] + extra_w)]
        xp = np.pad(xa, pads_, constant_values=-np.inf)
        return _windows(_windows(xp, -1, k[1], s[1], ow), -3, k[0], s[0], oh).max(axis=(-3, -1))
    return Plan(compute, [x], [y])


# ------------------------------------------------------- UpsampleNearest2d ----

@operator("UpsampleNearest2d", flops=moves)
def upsample_nearest2d(self, output_size, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    size = int_array(output_size, "outputSize")
    need_dtype(x, "self", F | {"f64", "u8"})
    need_same_dtype(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"), lo=4, hi=4)
    if x.format not in (lib.ACL_FORMAT_NCHW, lib.ACL_FORMAT_NHWC) or y.format != x.format:
        raise invalid(f"self / out formats {x.format} / {y.format} should be NCHW or NHWC, alike")
    if len(size) != 2 or 0 in size:
        raise invalid(f"outputSize {list(size)} should be 2 non-zero values")
    nhwc = x.format == lib.ACL_FORMAT_NHWC
    hw_axes = (1, 2) if nhwc else (2, 3)
    nc_axes = (0, 3) if nhwc else (0, 1)
    if any(x.dims[i] != y.dims[i] for i in nc_axes):
        raise invalid(f"self {list(x.dims)} and out {list(y.dims)} differ in N or C")
    if tuple(y.dims[i] for i in hw_axes) != tuple(size):
        raise invalid(f"out {list(y.dims)} does not have outputSize {list(size)} as H, W")
    if max(x.dims + y.dims) > 1 << 20:
        raise invalid("a dim of self or out exceeds 2^20")
    src_hw = [x.dims[i] for i in hw_axes]
    index = []
    for n_in, n_out in zip(src_hw, size):
        scale = np.float32(n_in) / np.float32(n_out)
        idx = np.floor(np.arange(n_out, dtype=np.float32) * scale).astype(np.int64)
        index.append(np.minimum(idx, n_in - 1))

    def compute(a):
        return np.take(np.take(a, index[0], axis=hw_axes[0]), index[1], axis=hw_axes[1])
    return Plan(compute, [x], [y])



# ------------------------------------------------------ UpsampleBilinear2d ----

@operator("UpsampleBilinear2d")
def upsample_bilinear2d(self, output_size, align_corners, scales_h, scales_w, out):
    x, y = tensor(self, "self"), tensor(out, "out")
    size = int_array(output_size, "outputSize")
    need_dtype(x, "self", F | {"f64"})
    need_same_dtype(x, y, "self", "out")
    need_dims((x, "self"), (y, "out"), lo=4, hi=4)
    if x.format not in (lib.ACL_FORMAT_NCHW, lib.ACL_FORMAT_NHWC) or y.format != x.format:
        raise invalid(f"self / out formats {x.format} / {y.format} should be NCHW or NHWC, alike")
    if dtypes.short(x.dtype) == "f64" and x.format != lib.ACL_FORMAT_NHWC:
        raise invalid("DOUBLE is supported in NHWC format only")
    if len(size) != 2 or min(size) <= 0:
        raise invalid(f"outputSize {list(size)} should be 2 values > 0")
    if scales_h < 0 or scales_w < 0:
        raise invalid(f"scalesH {scales_h} / scalesW {scales_w} are negative")
    nhwc = x.format == lib.ACL_FORMAT_NHWC
    hw_axes = (1, 2) if nhwc else (2, 3)
    if any(x.dims[i] != y.dims[i] for i in ((0, 3) if nhwc else (0, 1))):
        raise invalid(f"self {list(x.dims)} and out {list(y.dims)} differ in N or C")
    if tuple(y.dims[i] for i in hw_axes) != tuple(size):
        raise invalid(f"out {list(y.dims)} does not have outputSize {list(size)} as H, W")
    src_hw = [x.dims[i] for i in hw_axes]
    taps = []
    for n_in, n_out, given in zip(src_hw, size, (scales_h, scales_w)):
        if given > 0 and math.floor(n_in * given) != n_out:
            raise invalid(f"outputSize {n_out} is not floor({n_in} * scale {given})")
        if align_corners:
            if n_out == 1:
                raise invalid("alignCorners: the scale (in - 1) / (out - 1) is undefined for an output size of 1")
            scale = np.float32((n_in - 1) / (n_out - 1))
            src = np.arange(n_out, dtype=np.float32) * scale
        else:
            scale = np.float32(1.0 / given if given > 0 else n_in / n_out)
            src = np.maximum((np.arange(n_out, dtype=np.float32) + np.float32(0.5)) * scale - np.float32(0.5), 0)
        lo = src.astype(np.int64)
        w_hi = src - lo.astype(np.float32)            # lambda_1 (f32); lambda_0 = 1 - lambda_1
        taps.append((np.minimum(lo, n_in - 1), np.minimum(lo + 1, n_in - 1), w_hi))

    def compute(a):
        a = as_compute(a, x.dtype)   # interpolated in f32 (half types cast up)
        for axis, (lo, hi, w) in zip(hw_axes, taps):
            shape = [1] * a.ndim
            shape[axis] = len(w)
            w = w.astype(a.dtype).reshape(shape)
            a = np.take(a, lo, axis=axis) * (1 - w) + np.take(a, hi, axis=axis) * w
        return a
    return Plan(compute, [x], [y])
