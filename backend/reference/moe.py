"""MUL_MAT_ID and OUT_PROD, from their definitions, in f64.

MUL_MAT_ID: out[t, e] = as[ids[t, e]] @ b[t, e % n_b] (one expert matrix per token and slot).
OUT_PROD:   out[i3, i2] = a[i3 // r3, i2 // r2] @ b[i3, i2]^T with a {m, k}, b {n, k}
            (ggml's ne order), a's batches repeated as in MUL_MAT.
MUL_MAT_ID's experts arrive as stored (blocks when quantized) and are decoded one at a time,
those in use only; OUT_PROD's quantized operands arrive dequantized (Memory.read).
"""
from __future__ import annotations

import numpy as np

from cannops.cases import quants

from . import reference
from .matmul import mul_mat


@reference("MUL_MAT_ID", stored=(0,))
def mul_mat_id(node, as_, b, ids):
    a = np.asarray(as_)[0]                                # (n_expert, m, k) or its blocks
    t = node.src[0].type
    x = np.asarray(b, dtype=np.float64)[0]                # (n_tokens, n_b, k)
    ids = np.asarray(ids)[0, 0].astype(np.int64)          # (n_tokens, n_used)
    n_tokens, n_used = ids.shape
    x = x[:, np.arange(n_used) % x.shape[1]]              # (n_tokens, n_used, k)
    out = np.zeros((n_tokens, n_used, a.shape[1]))
    for e in np.unique(ids):                              # one product per expert in use
        rows = ids == e
        w = quants.dequantize(np.ascontiguousarray(a[e]), t) if t.is_quantized else a[e]
        out[rows] = x[rows] @ w.astype(np.float64).T
    return out[None]


@reference("OUT_PROD")
def out_prod(node, a, b):
    """out = b^T a per matrix, a {m, k} and b {n, k} in ggml's ne (NumPy (k, m), (k, n)),
    batches broadcast as MUL_MAT's: MUL_MAT of the two operands transposed."""
    return mul_mat(node, np.swapaxes(a, -1, -2), np.swapaxes(b, -1, -2))
