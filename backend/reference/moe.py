"""MUL_MAT_ID and OUT_PROD, from their definitions, in f64.

MUL_MAT_ID: out[t, e] = as[ids[t, e]] @ b[t, e % n_b] (one expert matrix per token and slot).
OUT_PROD:   out[i3, i2] = a[i3 // r3, i2 // r2] @ b[i3, i2]^T with a {m, k}, b {n, k}
            (ggml's ne order), a's batches repeated as in MUL_MAT.
Quantized weights arrive dequantized (Memory.read).
"""
from __future__ import annotations

import numpy as np

from . import reference


@reference("MUL_MAT_ID")
def mul_mat_id(node, as_, b, ids):
    a = np.asarray(as_)[0]                                # (n_expert, m, k), widened per expert
    x = np.asarray(b, dtype=np.float64)[0]                # (n_tokens, n_b, k)
    ids = np.asarray(ids)[0, 0].astype(np.int64)          # (n_tokens, n_used)
    n_tokens, n_used = ids.shape
    x = x[:, np.arange(n_used) % x.shape[1]]              # (n_tokens, n_used, k)
    out = np.zeros((n_tokens, n_used, a.shape[1]))
    for e in np.unique(ids):                              # one product per expert in use
        rows = ids == e
        out[rows] = x[rows] @ a[e].astype(np.float64).T
    return out[None]


@reference("OUT_PROD")
def out_prod(node, a, b):
    a = np.asarray(a, dtype=np.float64)                   # (ne03, ne02, k, m)
    b = np.asarray(b, dtype=np.float64)                   # (ne13, ne12, k, n)
    ne03, ne02, k, m = a.shape
    ne13, ne12, _, n = b.shape
    r3, r2 = ne13 // ne03, ne12 // ne02
    bg = b.reshape(ne03, r3, ne02, r2, k, n)
    ag = a[:, None, :, None]                              # (ne03, 1, ne02, 1, k, m)
    out = np.matmul(np.swapaxes(bg, -1, -2), ag)          # (ne03, r3, ne02, r2, n, m)
    return out.reshape(ne13, ne12, n, m)
