"""SOFT_MAX (ggml_soft_max_ext + ggml_soft_max_add_sinks), from its definition, in f64.

Row i of head h (dim 2) is softmax(scale * a + slope(h) * mask), where the mask row is
broadcast over dims 2 and 3 (mask index = index modulo the mask's size), slope(h) is the
ALiBi slope of head h (1 without max_bias), and a sink adds one more logit, sinks[h], to the
normalisation without an output of its own.
"""
from __future__ import annotations

import numpy as np

from . import reference


def alibi_slopes(n_head: int, max_bias: float) -> np.ndarray:
    """ALiBi slopes (Press et al.), extended to head counts that are not powers of two:
    the first 2^floor(log2 n) heads get m0^(h+1), m0 = 2^(-max_bias/n'), the others the
    odd powers of m1 = 2^(-max_bias/(2 n'))."""
    if max_bias <= 0.0:
        return np.ones(n_head)
    n2 = 1 << int(np.floor(np.log2(n_head)))
    h = np.arange(n_head, dtype=np.float64)
    m0 = 2.0 ** (-max_bias / n2)
    m1 = 2.0 ** (-max_bias / 2.0 / n2)
    return np.where(h < n2, m0 ** (h + 1), m1 ** (2 * (h - n2) + 1))


@reference("SOFT_MAX")
def soft_max(node, a, mask=None, sinks=None):
    scale, max_bias = node.param_f32(0), node.param_f32(1)
    x = np.asarray(a, dtype=np.float64) * scale          # (ne3, ne2, ne1, ne0)
    ne3, ne2, ne1, _ = x.shape
    if mask is not None:
        m = np.asarray(mask, dtype=np.float64)[:, :, :ne1, :]  # the mask may have more rows
        reps = (ne3 // m.shape[0], ne2 // m.shape[1], 1, 1)
        slope = alibi_slopes(ne2, max_bias)[None, :, None, None]
        x = x + slope * np.tile(m, reps)
    mx = x.max(axis=-1, keepdims=True)
    if sinks is not None:
        sk = np.asarray(sinks, dtype=np.float64).reshape(-1)[None, :, None, None]
        mx = np.maximum(mx, sk)
    e = np.exp(x - mx)
    total = e.sum(axis=-1, keepdims=True)
    if sinks is not None:
        total = total + np.exp(sk - mx)
    return e / total
