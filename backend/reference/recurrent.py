"""SSM_SCAN, RWKV_WKV6, RWKV_WKV7, GATED_LINEAR_ATTN, GATED_DELTA_NET and SOLVE_TRI, from
their recurrences: one step per token (a loop over time), every sequence, head and channel
at once. States are kept in float64; outputs are the flat concatenation ggml lays out
(per-token outputs, then the states)."""
from __future__ import annotations

import numpy as np

from . import reference


def _f64(a):
    return np.asarray(a, dtype=np.float64)


def softplus(x):
    """log(1 + e^x), and x itself past 20, as Mamba's kernels (and ggml) cut it off."""
    return np.where(x > 20.0, x, np.log1p(np.exp(np.minimum(x, 20.0))))


@reference("SSM_SCAN")
def ssm_scan(node, s, x, dt, A, B, C, ids):
    """Selective scan per sequence n (initial state s[ids[n]]), head h, channel p, state i:
        d = softplus(dt[t, h]);  S[h, p, i] = S * exp(d A[h, i]) + d x[t, h, p] B[t, g(h), i]
        y[t, h, p] = sum_i S[h, p, i] C[t, g(h), i],   g(h) = h // (n_head / n_group)
    (A has one value per head in Mamba-2, one per state element in Mamba-1). Output: y,
    then the final state, then the states 1 .. K-1 tokens before the end."""
    K = node.param_i32(0)
    x, dt, B, C = _f64(x), _f64(dt)[0], _f64(B), _f64(C)       # x (n_s, n_t, H, P), dt (n_s, n_t, H)
    n_s, n_t, H, P = x.shape
    rep = H // B.shape[2]
    Bh, Ch = np.repeat(B, rep, axis=2), np.repeat(C, rep, axis=2)   # (n_s, n_t, H, N)
    A = _f64(A)[0, 0]                                             # (H, 1 or N)
    S = _f64(s)[np.asarray(ids).reshape(-1)]                      # (n_s, H, P, N)
    y = np.empty_like(x)
    snaps = {}
    for t in range(n_t):
        d = softplus(dt[:, t])                                    # (n_s, H)
        decay = np.exp(d[:, :, None] * A[None])[:, :, None, :]    # (n_s, H, 1, 1 or N)
        S = S * decay + (d[:, :, None] * x[:, t])[..., None] * Bh[:, t, :, None, :]
        y[:, t] = np.einsum("shpn,shn->shp", S, Ch[:, t])
        slot = n_t - 1 - t
        if 0 < slot < K:
            snaps[slot] = S
    states = [S] + [snaps.get(k, np.zeros_like(S)) for k in range(1, K)]
    return _concat(node, y, *states)


def _per_seq(t, n_s):
    """(n_tokens, H, S) -> (n_s, n_seq_tokens, H, S): tokens are grouped by sequence."""
    a = _f64(t).reshape(-1, *t.shape[-2:])
    return a.reshape(n_s, a.shape[0] // n_s, *a.shape[1:])


def _state(s, H):
    """{S*S*H, n_s} -> (n_s, H, S, S): state[h][row][col] as ggml stores it."""
    a = _f64(s).reshape(s.shape[-2], -1)
    n = int(round((a.shape[1] / H) ** 0.5))
    return a.reshape(a.shape[0], H, n, n)


def _concat(node, *parts):
    """The node's values: the parts' elements one after the other, in the node's shape."""
    return np.concatenate([p.reshape(-1) for p in parts]).reshape(node.ne[::-1])


@reference("RWKV_WKV6")
def rwkv_wkv6(node, k, v, r, tf, td, s):
    """RWKV-6 per head, state S[i, j] (key i, value j):
        y[t, j] = sum_i r[t, i] (tf[i] k[t, i] v[t, j] + S[i, j]);  S = S td[t, i] + k[t, i] v[t, j]"""
    H = k.shape[-2]
    S = _state(s, H)
    k, v, r, td = (_per_seq(a, S.shape[0]) for a in (k, v, r, td))
    u = _f64(tf).reshape(H, -1)[None, :, :, None]
    y = np.empty_like(v)
    for t in range(k.shape[1]):
        kv = k[:, t, :, :, None] * v[:, t, :, None, :]
        y[:, t] = np.einsum("nhi,nhij->nhj", r[:, t], u * kv + S)
        S = S * td[:, t, :, :, None] + kv
    return _concat(node, y, S)


@reference("GATED_LINEAR_ATTN")
def gated_linear_attn(node, k, v, q, g, s):
    """Gated linear attention per head, state S[i, j] (key i, value j):
        S = S g[t, i] + k[t, i] v[t, j];  y[t, j] = scale sum_i q[t, i] S[i, j]"""
    scale = node.param_f32(0)
    H = k.shape[-2]
    S = _state(s, H)
    k, v, q, g = (_per_seq(a, S.shape[0]) for a in (k, v, q, g))
    y = np.empty_like(v)
    for t in range(k.shape[1]):
        S = S * g[:, t, :, :, None] + k[:, t, :, :, None] * v[:, t, :, None, :]
        y[:, t] = scale * np.einsum("nhi,nhij->nhj", q[:, t], S)
    return _concat(node, y, S)


@reference("RWKV_WKV7")
def rwkv_wkv7(node, r, w, k, v, a, b, s):
    """RWKV-7 per head, state S[i, j] (value i, key j):
        S = S w[t, j] + v[t, i] k[t, j] + (sum_j' a[t, j'] S[i, j']) b[t, j];  y[t, i] = sum_j S[i, j] r[t, j]"""
    H = k.shape[-2]
    S = _state(s, H)
    r, w, k, v, a, b = (_per_seq(x, S.shape[0]) for x in (r, w, k, v, a, b))
    y = np.empty_like(v)
    for t in range(k.shape[1]):
        sa = np.einsum("nhij,nhj->nhi", S, a[:, t])
        S = (S * w[:, t, :, None, :] + v[:, t, :, :, None] * k[:, t, :, None, :]
             + sa[..., None] * b[:, t, :, None, :])
        y[:, t] = np.einsum("nhij,nhj->nhi", S, r[:, t])
    return _concat(node, y, S)


@reference("GATED_DELTA_NET")
def gated_delta_net(node, q, k, v, g, beta, state):
    """Gated delta rule per sequence and value head h (query / key head h mod H_k), state
    S[i, j] (key i, value j):
        S = S exp(g[t])                (g scalar, or one value per key row i: KDA)
        S += k[t, i] (beta[t] (v[t, j] - sum_i' S[i', j] k[t, i']))
        y[t, j] = sum_i S[i, j] q[t, i] / sqrt(S_v)
    Output: y, then the final state, then the states 1 .. K-1 tokens before the end; a state
    is stored transposed (row j holds S[:, j])."""
    K = node.param_i32(0)
    v, g, beta = _f64(v), _f64(g), _f64(beta)[..., 0]          # (n_s, n_t, H, S_v), ..., (n_s, n_t, H)
    n_s, n_t, H, S_v = v.shape
    heads = np.arange(H)
    q = _f64(q)[:, :, heads % q.shape[2]]
    k = _f64(k)[:, :, heads % k.shape[2]]
    q = np.repeat(q, n_s // q.shape[0], axis=0)
    k = np.repeat(k, n_s // k.shape[0], axis=0)
    S = np.swapaxes(_f64(state), -1, -2)                         # (n_s, H, S_v(i), S_v(j))
    y = np.empty_like(v)
    snaps = {}
    for t in range(n_t):
        S = S * np.exp(g[:, t])[..., :, None]                    # g (n_s, H, 1 or S_v) -> rows i
        delta = beta[:, t, :, None] * (v[:, t] - np.einsum("nhij,nhi->nhj", S, k[:, t]))
        S = S + k[:, t, :, :, None] * delta[:, :, None, :]
        y[:, t] = np.einsum("nhij,nhi->nhj", S, q[:, t]) / np.sqrt(S_v)
        slot = n_t - 1 - t
        if 0 < slot < K:
            snaps[slot] = S
    states = [S] + [snaps.get(s, np.zeros_like(S)) for s in range(1, K)]
    return _concat(node, y, *(np.swapaxes(st, -1, -2) for st in states))


@reference("SOLVE_TRI")
def solve_tri(node, a, b):
    """X with A X = B per batch, A (n, n) lower triangular (row = ne1, column = ne0)."""
    return np.linalg.solve(np.tril(_f64(a)), _f64(b))
