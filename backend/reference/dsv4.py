"""DSV4_HC_COMB, DSV4_HC_PRE and DSV4_HC_POST (DeepSeek-V4 hyper-connections, hc = 4),
from ggml-cpu's definition of each."""
from __future__ import annotations

import numpy as np

from . import reference

HC = 4


@reference("DSV4_HC_COMB")
def dsv4_hc_comb(node, mixes, scale, base):
    """Per token, the hc x hc block of mixes after the 2*hc pre / post weights:
    M[src, dst] = softmax_dst(mixes * scale[2] + base) + eps, then Sinkhorn: columns
    (sum over src) normalised, and n_iter - 1 times rows (sum over dst) then columns, each
    sum with eps added. Out (ne {dst, src, token}) = M."""
    eps, n_iter = node.param_f32(0), node.param_i32(1)
    m = np.asarray(mixes, np.float64).reshape(-1, (2 + HC) * HC)[:, 2 * HC:]
    b = np.asarray(base, np.float64).reshape(-1)[2 * HC:]
    z = (m * float(np.asarray(scale).reshape(-1)[2]) + b).reshape(-1, HC, HC)   # (token, src, dst)
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    M = e / e.sum(axis=-1, keepdims=True) + eps

    def cols(M):
        return M / (M.sum(axis=-2, keepdims=True) + eps)

    M = cols(M)
    for _ in range(n_iter - 1):
        M = cols(M / (M.sum(axis=-1, keepdims=True) + eps))
    return M


@reference("DSV4_HC_PRE")
def dsv4_hc_pre(node, x, weights):
    """out[t, e] = sum_h x[t, h, e] w[t, h]: the weighted sum of the hc streams; gated
    (op_params word 1): scale * sum_h x[t, h, e] sigmoid(gate[t, h, e])."""
    x = np.asarray(x, np.float64)[0]
    if node.param_i32(1):
        gate = np.asarray(weights, np.float64)[0]
        return node.param_f32(0) * (x / (1.0 + np.exp(-gate))).sum(axis=1)
    return np.einsum("the,th->te", x, np.asarray(weights, np.float64)[0, 0])


@reference("DSV4_HC_POST")
def dsv4_hc_post(node, x, residual, post, comb=None):
    """out[t, d, e] = x[t, e] post[t, d] + sum_s residual[t, s, e] comb[t, s, d] (no comb:
    the identity, residual itself)."""
    x, r = np.asarray(x, np.float64)[0, 0], np.asarray(residual, np.float64)[0]
    p = np.asarray(post, np.float64)[0, 0]
    mixed = r if comb is None else np.einsum("tse,tsd->tde", r, np.asarray(comb, np.float64)[0])
    return x[:, None, :] * p[:, :, None] + mixed
