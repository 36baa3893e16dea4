"""SSM_CONV and TIMESTEP_EMBEDDING, from their definitions."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from . import reference


@reference("SSM_CONV")
def ssm_conv(node, sx, c):
    """out[s, t, r] = sum_i sx[s, r, t + i] * c[r, i]: a per-channel sliding dot product of
    the d_conv weights over the padded token axis (Mamba's causal conv1d)."""
    d_conv = c.shape[-1]
    x = np.asarray(sx, dtype=np.float64)[0]              # (n_s, d_inner, d_conv-1+n_t)
    w = np.asarray(c, dtype=np.float64)[0, 0]            # (d_inner, d_conv)
    win = sliding_window_view(x, d_conv, axis=-1)        # (n_s, d_inner, n_t, d_conv)
    return np.einsum("srti,ri->str", win, w)             # (n_s, n_t, d_inner)


@reference("TIMESTEP_EMBEDDING")
def timestep_embedding(node, t):
    """Row i = [cos(t_i f_j) for j < half] + [sin(t_i f_j) for j < half] (+ a 0 when dim is
    odd), f_j = max_period^(-j/half), half = dim // 2."""
    dim, max_period = node.param_i32(0), node.param_i32(1)
    half = dim // 2
    ts = np.asarray(t, dtype=np.float64).reshape(-1)[:node.ne[1]]
    freqs = np.exp(-np.log(max_period) * np.arange(half) / half)
    arg = ts[:, None] * freqs[None, :]
    out = np.zeros((len(ts), dim))
    out[:, :half] = np.cos(arg)
    out[:, half:2 * half] = np.sin(arg)
    return out
