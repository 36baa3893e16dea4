"""LIGHTNING_INDEXER, from its definition."""
from __future__ import annotations

import numpy as np

from . import reference


@reference("LIGHTNING_INDEXER")
def lightning_indexer(node, q, k, w, m):
    """out[s, t, j] = sum_h relu(q[s, t, h] . k[s, j]) * w[s, t, h] + m[s % nm, t, j]
    (q: [ns, nb, nh, hsk], k: [ns, kv, 1, hsk], w: [ns, 1, nb, nh], m: [nm, 1, nb, kv])."""
    ns, nb, nh, hsk = q.shape
    out = np.empty((ns, 1, nb, k.shape[1]))
    for s in range(ns):   # one stream at a time keeps the [nb * nh, kv] scores small
        qk = q[s].astype(np.float64).reshape(nb * nh, hsk) @ k[s, :, 0].astype(np.float64).T
        score = np.einsum("thj,th->tj", np.maximum(qk, 0.0).reshape(nb, nh, -1), w[s, 0].astype(np.float64))
        out[s, 0] = score + m[s % m.shape[0], 0].astype(np.float64)
    return out
