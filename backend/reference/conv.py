"""CONV_2D, CONV_2D_DW, CONV_3D, CONV_TRANSPOSE_1D and CONV_TRANSPOSE_2D, from the
definition of a (transposed) cross-correlation. Arrays are ggml's ne reversed, so ggml's
{W, H, C, N} is NumPy's (N, C, H, W) and every spatial tuple below runs D, H, W."""
from __future__ import annotations

import math

import numpy as np

from . import reference


def correlate(x, w, stride, pad, dil, out_size, groups=1):
    """out[n, o, i] = sum_{c, k} x[n, c, i*stride + k*dil - pad] * w[o, c, k] over the
    spatial index tuples i, k, with x zero outside its bounds; x (N, C, *S), w (O, C/groups,
    *K). One matmul per kernel tap (a strided slice of the zero-padded input), in f32 as
    fast as BLAS goes, summed in f64: its NMSE, about 1e-12, is far below every threshold."""
    x, w = np.asarray(x, np.float32), np.asarray(w, np.float32)
    n, c, spatial, kernel = x.shape[0], x.shape[1], x.shape[2:], w.shape[2:]
    # pad high enough that every tap's slice exists, even when ggml's C-style size rule
    # gives an output for an input shorter than the dilated kernel
    hi = [max(0, (o - 1) * s + (k - 1) * d - p - (size - 1))
          for o, s, k, d, p, size in zip(out_size, stride, kernel, dil, pad, spatial)]
    xp = np.pad(x, [(0, 0), (0, 0)] + list(zip(pad, hi)))
    xg = xp.reshape((n, groups, c // groups) + xp.shape[2:])
    wg = w.reshape((groups, w.shape[0] // groups, c // groups) + kernel)
    out = np.zeros((n, groups, w.shape[0] // groups, math.prod(out_size)))
    for tap in np.ndindex(*kernel):
        win = tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s in zip(tap, dil, out_size, stride))
        cols = xg[(slice(None),) * 3 + win].reshape(n, groups, c // groups, -1)
        out += wg[(Ellipsis,) + tap] @ cols          # (groups, f, c) @ (n, groups, c, P)
    return out.reshape((n, w.shape[0]) + tuple(out_size))


def correlate_transposed(x, w, stride):
    """The transpose of correlate (no padding, dilation 1): every input sample scatters
    its kernel, out[n, o, i*stride + k] += x[n, c, i] * w[c, o, k]; x (N, C, *S), w (C, O, *K);
    f32 products summed in f64, as in correlate."""
    x, w = np.asarray(x, np.float32), np.asarray(w, np.float32)
    spatial, kernel = x.shape[2:], w.shape[2:]
    out_size = tuple((size - 1) * s + k for size, s, k in zip(spatial, stride, kernel))
    out = np.zeros((x.shape[0], w.shape[1]) + out_size)
    for tap in np.ndindex(*kernel):
        win = tuple(slice(t, t + (size - 1) * s + 1, s) for t, size, s in zip(tap, spatial, stride))
        out[(slice(None), slice(None)) + win] += np.einsum("nc...,co->no...", x, w[(Ellipsis,) + tap],
                                                          optimize=True)
    return out


def _p(node, *idx):
    return tuple(node.param_i32(i) for i in idx)


@reference("CONV_2D")
def conv_2d(node, kernel, input):
    """kernel (OC, IC, KH, KW), input (N, IC, H, W); op_params [s0, s1, p0, p1, d0, d1], 0 = W."""
    return correlate(input, kernel, _p(node, 1, 0), _p(node, 3, 2), _p(node, 5, 4), node.ne[1::-1])


@reference("CONV_2D_DW")
def conv_2d_dw(node, kernel, input):
    """One filter per channel: kernel (C, 1, KH, KW), groups = C."""
    return correlate(input, kernel, _p(node, 1, 0), _p(node, 3, 2), _p(node, 5, 4), node.ne[1::-1],
                     groups=input.shape[1])


@reference("CONV_3D")
def conv_3d(node, kernel, input):
    """kernel (OC*IC, KD, KH, KW), input (N*IC, D, H, W), out (N*OC, OD, OH, OW): channels
    are the inner part of the 4th ggml dim; op_params [s0, s1, s2, p0, p1, p2, d0, d1, d2, IC, N, OC]."""
    ic, n, oc = _p(node, 9, 10, 11)
    x = input.reshape((n, ic) + input.shape[1:])
    w = kernel.reshape((oc, ic) + kernel.shape[1:])
    out = correlate(x, w, _p(node, 2, 1, 0), _p(node, 5, 4, 3), _p(node, 8, 7, 6), node.ne[2::-1])
    return out.reshape((n * oc,) + out.shape[2:])


@reference("CONV_TRANSPOSE_1D")
def conv_transpose_1d(node, kernel, input):
    """kernel (IC, OC, K), input (IC, L) -> (OC, (L-1)*s0 + K); op_params [s0, p0 = 0, d0 = 1]."""
    w = kernel.reshape(kernel.shape[-3:])
    x = input.reshape((1,) + input.shape[-2:])
    return correlate_transposed(x, w, _p(node, 0))


@reference("CONV_TRANSPOSE_2D")
def conv_transpose_2d(node, kernel, input):
    """kernel (IC, OC, KH, KW), input (N, IC, H, W); op_params [stride]."""
    return correlate_transposed(input, kernel, _p(node, 0) * 2)
