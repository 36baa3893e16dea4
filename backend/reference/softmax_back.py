"""SOFT_MAX_BACK, from its definition."""
from __future__ import annotations

import numpy as np

from . import f32, reference


@reference("SOFT_MAX_BACK")
def soft_max_back(node, dy, y):
    """dx = scale * y * (dy - sum(y * dy)) per row: the softmax Jacobian diag(y) - y y^T
    applied to dy, times the forward pass's scale. max_bias only sets the slopes of a
    mask's ALiBi term, and the backward op has no mask: it does not enter."""
    dy, y = f32(dy).astype(np.float64), f32(y).astype(np.float64)
    return node.param_f32(0) * y * (dy - np.sum(y * dy, axis=-1, keepdims=True))
