"""IM2COL, IM2COL_3D, COL2IM_1D, POOL_1D, POOL_2D and UPSCALE, from their definitions.

Arrays are NumPy views of ggml tensors: shape ne[::-1], so an image {W, H, C, N} is
(N, C, H, W). Windows are gathered with index arrays over a zero-padded copy.
"""
from __future__ import annotations

import numpy as np

from . import reference

FLT_MAX = float(np.finfo(np.float32).max)


def _taps(n_out: int, k: int, s: int, d: int) -> np.ndarray:
    """(n_out, k) positions, in the padded input, that output o reads with tap j: o*s + j*d."""
    return np.arange(n_out)[:, None] * s + np.arange(k)[None, :] * d


@reference("IM2COL")
def im2col(node, kernel, image):
    """dst[n, oh, ow, (c, kh, kw)] = image[n, c, oh*s1 + kh*d1 - p1, ow*s0 + kw*d0 - p0], 0 outside;
    1-D: the same with one image row (KH = OH = 1), the batch in ne2."""
    s0, s1, p0, p1, d0, d1, is_2d = node.params_i32(7)
    x = np.asarray(image)
    if not is_2d:
        x, s1, p1, d1 = x[0][:, :, None, :], 1, 0, 1      # (N, IC, 1, IW)
    n, ic, _, _ = x.shape
    kw = kernel.shape[-1]
    kh = kernel.shape[-2] if is_2d else 1
    ow = node.ne[1]
    oh = node.ne[2] if is_2d else 1
    xp = np.pad(x, [(0, 0), (0, 0), (p1, p1), (p0, p0)])
    hi, wi = _taps(oh, kh, s1, d1), _taps(ow, kw, s0, d0)
    win = xp[:, :, hi[:, None, :, None], wi[None, :, None, :]]   # (N, IC, OH, OW, KH, KW)
    out = win.transpose(0, 2, 3, 1, 4, 5).reshape(n, oh, ow, ic * kh * kw)
    return out if is_2d else out.reshape(1, n, ow, ic * kw)


@reference("IM2COL_3D")
def im2col_3d(node, kernel, image):
    """dst[n*OD + od, oh, ow, (c, kd, kh, kw)] = image[n*IC + c, od*s2 + kd*d2 - p2,
    oh*s1 + kh*d1 - p1, ow*s0 + kw*d0 - p0], 0 outside (image {IW, IH, ID, N*IC})."""
    s0, s1, s2, p0, p1, p2, d0, d1, d2, ic = node.params_i32(10)
    x = np.asarray(image)
    n = x.shape[0] // ic
    kd, kh, kw = kernel.shape[1:]
    ow, oh = node.ne[1], node.ne[2]
    od = node.ne[3] // n if n else 0
    x = x[:n * ic].reshape((n, ic) + x.shape[1:])
    xp = np.pad(x, [(0, 0), (0, 0), (p2, p2), (p1, p1), (p0, p0)])
    di, hi, wi = _taps(od, kd, s2, d2), _taps(oh, kh, s1, d1), _taps(ow, kw, s0, d0)
    win = xp[:, :, di[:, None, None, :, None, None], hi[None, :, None, None, :, None],
             wi[None, None, :, None, None, :]]                   # (N, IC, OD, OH, OW, KD, KH, KW)
    out = win.transpose(0, 2, 3, 4, 1, 5, 6, 7)
    return out.reshape(n * od, oh, ow, ic * kd * kh * kw)


@reference("COL2IM_1D")
def col2im_1d(node, cols):
    """Overlap-add: signal[oc, t*s0 + k] += cols[t, oc*K + k], then p0 samples cropped from each
    end (the scatter half of a transposed 1-D convolution)."""
    s0, oc, p0 = node.param_i32(0), node.param_i32(1), node.param_i32(2)
    c = np.asarray(cols, dtype=np.float64)[0, 0]                 # (T_in, K*OC)
    t_in = c.shape[0]
    k = c.shape[1] // oc
    c = c.reshape(t_in, oc, k)
    full = np.zeros((oc, (t_in - 1) * s0 + k))
    for j in range(k):                                           # one kernel tap at a time
        full[:, j:j + (t_in - 1) * s0 + 1:s0] += c[:, :, j].T
    return full[:, p0:p0 + node.ne[0]]


def _pool_windows(x: np.ndarray, axis: int, k: int, s: int, p: int, n_out: int, fill: float):
    """x padded by p with `fill` along `axis`, windows gathered: axis -> (n_out, k) there."""
    pads = [(0, 0)] * x.ndim
    pads[axis] = (p, p)
    xp = np.pad(x, pads, constant_values=fill)
    return np.take(xp, _taps(n_out, k, s, 1), axis=axis)


@reference("POOL_1D")
def pool_1d(node, a):
    """Max or average over windows of k0 (stride s0, padding p0) along ne0; padding is
    ignored: max of the valid values (-FLT_MAX when there is none), average over the valid
    count (0 when none)."""
    op, k0, s0, p0 = node.params_i32(4)
    x = np.asarray(a, dtype=np.float64)
    ow = node.ne[0]
    if op == 0:
        return _pool_windows(x, -1, k0, s0, p0, ow, -FLT_MAX).max(axis=-1)
    total = _pool_windows(x, -1, k0, s0, p0, ow, 0.0).sum(axis=-1)
    count = _pool_windows(np.ones(x.shape[-1]), -1, k0, s0, p0, ow, 0.0).sum(axis=-1)
    return np.where(count > 0, total / np.maximum(count, 1), 0.0)


@reference("POOL_2D")
def pool_2d(node, a):
    """Max or average over k1 x k0 windows (strides s1, s0; paddings p1, p0) of each plane;
    max ignores the padding (-FLT_MAX when a window holds no value), average divides by
    k0*k1 whatever the padding."""
    op, k0, k1, s0, s1, p0, p1 = node.params_i32(7)
    x = np.asarray(a, dtype=np.float64)
    ow, oh = node.ne[0], node.ne[1]
    fill = -FLT_MAX if op == 0 else 0.0
    win = _pool_windows(_pool_windows(x, -1, k0, s0, p0, ow, fill), -3, k1, s1, p1, oh, fill)
    # win: (..., OH, KH, OW, KW)
    return win.max(axis=(-3, -1)) if op == 0 else win.sum(axis=(-3, -1)) / (k0 * k1)


# --- UPSCALE: per-axis taps (index, weight), applied separably; coordinates in f32 as ggml ---

def _nearest_index(n_out: int, sf: np.float32) -> np.ndarray:
    return (np.arange(n_out, dtype=np.float32) / sf).astype(np.int64)


def _axis_taps(n_out: int, n_in: int, sf: np.float32, mode: int, offset: np.float32, antialias: bool):
    """(index, weight) arrays of shape (taps, n_out) for one interpolated axis."""
    f32 = np.float32
    i = np.arange(n_out, dtype=f32)
    if mode == 0:
        return _nearest_index(n_out, sf)[None, :], np.ones((1, n_out))
    if antialias:   # triangle filter widened to 1/sf when shrinking, weights normalised
        support = max(f32(1.0), f32(1.0) / sf)
        center = (i + offset) / sf
        lo = np.maximum((center - support + offset).astype(np.int64), 0)
        hi = np.minimum((center + support + offset).astype(np.int64), n_in)
        idx = lo[None, :] + np.arange(int(np.ceil(2 * support)) + 2)[:, None]
        w = np.maximum(1.0 - np.abs((idx.astype(f32) - center + offset) * (f32(1.0) / support)), 0.0)
        w = np.where(idx < hi, w, 0.0).astype(np.float64)
        total = w.sum(axis=0)
        return np.minimum(idx, n_in - 1), w / np.where(total > 0, total, 1.0)
    x = (i + offset) / sf - offset
    x0 = np.floor(x).astype(np.int64)
    if mode == 1:   # bilinear: 2 taps, clamped to the edge, fraction from the clamped x0
        lo, hi = np.clip(x0, 0, n_in - 1), np.clip(x0 + 1, 0, n_in - 1)
        dx = np.clip(x - lo.astype(f32), 0.0, 1.0).astype(np.float64)
        return np.stack([lo, hi]), np.stack([1.0 - dx, dx])
    # bicubic: 4 taps of the a = -0.75 convolution kernel, indices clamped to the edge
    t = (x - x0.astype(f32)).astype(np.float64)
    a = -0.75

    def near(z):   # |z| <= 1
        return ((a + 2) * z - (a + 3)) * z * z + 1

    def far(z):    # 1 < |z| < 2
        return ((a * z - 5 * a) * z + 8 * a) * z - 4 * a

    idx = np.clip(x0[None, :] + np.arange(-1, 3)[:, None], 0, n_in - 1)
    return idx, np.stack([far(t + 1), near(t), near(1 - t), far(2 - t)])


@reference("UPSCALE")
def upscale(node, a):
    """Resize to dst's ne: ne0 / ne1 by the mode (nearest, bilinear with optional antialias,
    bicubic; half-pixel centres, or align_corners), ne2 / ne3 by nearest; the scale of each
    dim is ne_dst / ne_src in f32."""
    flags = node.param_i32(0)
    mode = flags & 0xFF
    src = node.src[0]
    f32 = np.float32
    sf = [f32(node.ne[d]) / f32(src.ne[d]) for d in range(4)]
    offset = f32(0.5)
    if flags & (1 << 8):   # align corners
        offset = f32(0.0)
        for d in (0, 1):
            if node.ne[d] > 1 and src.ne[d] > 1:
                sf[d] = f32(node.ne[d] - 1) / f32(src.ne[d] - 1)
    x = np.asarray(a, dtype=np.float64)
    x = x[_nearest_index(node.ne[3], sf[3])][:, _nearest_index(node.ne[2], sf[2])]
    antialias = bool(flags & (1 << 9))
    iy, wy = _axis_taps(node.ne[1], src.ne[1], sf[1], mode, offset, antialias)
    ix, wx = _axis_taps(node.ne[0], src.ne[0], sf[0], mode, offset, antialias)
    rows = sum(w[:, None] * x[:, :, i, :] for i, w in zip(iy, wy))   # (ne3, ne2, ne1, ne00)
    return sum(w * rows[..., i] for i, w in zip(ix, wx))
