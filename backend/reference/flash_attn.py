"""FLASH_ATTN_EXT (ggml_flash_attn_ext + add_sinks), from its definition.

For query row i of head h in sequence b, with K/V head g = h // (n_head / n_head_kv):

    s_j   = scale * q . k_j             (softcap c: s_j = c * tanh(s_j / c))
    s_j  += slope(h) * mask[b, h, i, j] (mask broadcast over heads and sequences; -inf drops j)
    out   = sum_j exp(s_j - M) v_j / (sum_j exp(s_j - M) + exp(sink[h] - M))

M is the largest logit (sink included); a row whose logits are all -inf has nothing to
attend to and gives 0 (also with a sink, whose weight then multiplies no value). The
result is stored permuted, {D_v, n_head, n_q, n_seq}. prec (op_params[3]) only asks a
device for f32 accumulation.

The grid reaches 200 G multiply-adds per case (kv = 16384, 512 queries, 24 heads of 256),
so the two products run in f32 BLAS and the softmax in f32 with its sums in f64: their
rounding (~1e-7 relative) stays four orders of magnitude under the 5e-4 NMSE threshold.
"""
from __future__ import annotations

import numpy as np

from . import reference
from .softmax import alibi_slopes

CHUNK = 1 << 23   # logits per block of query rows: bounds the memory of one step


@reference("FLASH_ATTN_EXT")
def flash_attn_ext(node, q, k, v, mask=None, sinks=None):
    scale, max_bias, softcap = node.param_f32(0), node.param_f32(1), node.param_f32(2)
    q = np.asarray(q, np.float32)                       # (n_seq, n_head, n_q, D_k)
    n_seq, n_head, n_q, _ = q.shape
    n_kv_head, n_kv = k.shape[1], k.shape[2]
    r = n_head // n_kv_head                             # query heads per K/V head
    k = np.asarray(k, np.float32)[:, :, None]           # (n_seq, n_kv_head, 1, n_kv, D_k)
    v = np.asarray(v, np.float32)[:, :, None]           # (n_seq, n_kv_head, 1, n_kv, D_v)
    q = q.reshape(n_seq, n_kv_head, r, n_q, -1)
    if mask is not None:
        # mask plane (b % m_seq, h % m_head): split b and h into (repeat, mask index)
        m = np.asarray(mask, np.float32)[:, :, :n_q]    # (m_seq, m_head, n_q, n_kv)
        ms, mh = m.shape[0], m.shape[1]
        m = m[None, :, None]                            # (1, m_seq, 1, m_head, n_q, n_kv)
        slope = alibi_slopes(n_head, max_bias).astype(np.float32).reshape(1, 1, n_head // mh, mh, 1, 1)
    sink = None if sinks is None else np.asarray(sinks, np.float32).reshape(n_kv_head, r, 1, 1)

    out = np.empty(q.shape[:-1] + (v.shape[-1],), np.float32)
    step = max(1, CHUNK // max(1, n_head * n_kv))
    for i0 in range(0, n_q, step):
        rows = slice(i0, i0 + step)
        s = np.matmul(q[:, :, :, rows], np.swapaxes(k, -1, -2))   # (.., rows, n_kv)
        s *= np.float32(scale)
        if softcap != 0.0:
            s = softcap * np.tanh(s / softcap)
        if mask is not None:
            s6 = s.reshape(n_seq // ms, ms, n_head // mh, mh, -1, n_kv)
            s6 += slope * m[..., rows, :]
        mx = s.max(axis=-1, keepdims=True)
        if sink is not None:
            mx = np.maximum(mx, sink)
        mx = np.where(np.isfinite(mx), mx, np.float32(0))   # all -inf: every weight is 0
        w = np.exp(s - mx, out=s)
        total = w.sum(axis=-1, keepdims=True, dtype=np.float64)
        if sink is not None:
            total = total + np.exp(sink - mx)
        acc = np.matmul(w, v)
        out[:, :, :, rows] = np.divide(acc, total, out=np.zeros(acc.shape), where=total > 0)
    return out.reshape(n_seq, n_head, n_q, -1).transpose(0, 2, 1, 3)   # {D_v, n_head, n_q, n_seq}
