"""TOP_K, from its definition (ARGSORT, which TOPK_MOE also uses, is in reduce.py)."""
from __future__ import annotations

import numpy as np

from . import f32, reference


@reference("TOP_K")
def top_k(node, a):
    """Per row, the indices of the k = ne0(dst) largest values (largest first; equal values
    in index order). ggml leaves the order of the k free: the metric ignores it."""
    return np.argsort(-f32(a), axis=-1, kind="stable")[..., :node.ne[0]]
