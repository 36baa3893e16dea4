"""Normalisations (NORM, RMS_NORM, L2_NORM, GROUP_NORM), from their definitions, in f64.

Rows are dim 0 (the last NumPy axis); GROUP_NORM normalises groups of channels (dim 2)
together with all of dims 0 and 1.
"""
from __future__ import annotations

import numpy as np

from . import reference


def _f64(x):
    return np.asarray(x, dtype=np.float64)


@reference("NORM")
def norm(node, a):
    """(x - mean) / sqrt(var + eps) per row, var the biased variance."""
    x = _f64(a)
    d = x - x.mean(axis=-1, keepdims=True)
    return d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + node.param_f32(0))


@reference("RMS_NORM")
def rms_norm(node, a):
    """x / sqrt(mean(x^2) + eps) per row."""
    x = _f64(a)
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + node.param_f32(0))


@reference("L2_NORM")
def l2_norm(node, a):
    """x / max(||x||_2, eps) per row."""
    x = _f64(a)
    return x / np.maximum(np.sqrt((x * x).sum(axis=-1, keepdims=True)), node.param_f32(0))


@reference("GROUP_NORM")
def group_norm(node, a):
    """n_groups groups of ceil(C / n_groups) consecutive channels (the last group may be
    smaller); each group, with all of dims 0 and 1, is normalised to mean 0 and variance 1."""
    n_groups, eps = node.param_i32(0), node.param_f32(1)
    x = _f64(a)                                   # (ne3, C, ne1, ne0)
    n_ch = x.shape[1]
    per_group = -(-n_ch // n_groups)
    group = np.arange(n_ch) // per_group          # group index of each channel
    starts = np.arange(0, n_ch, per_group)
    count = np.bincount(group) * x.shape[2] * x.shape[3]

    def group_mean(v):                            # (ne3, C, ne1, ne0) -> (ne3, C, 1, 1)
        s = np.add.reduceat(v.sum(axis=(2, 3)), starts, axis=1) / count
        return s[:, group, None, None]

    d = x - group_mean(x)
    return d / np.sqrt(group_mean(d * d) + eps)
