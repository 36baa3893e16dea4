"""Selecting the k largest: test_top_k (TOP_K, with and without tied values),
test_topk_qsa (TOPK_QSA, 0.25.3: a sparse-attention block selection ending in TOP_K) and
test_topk_moe (TOPK_MOE: the fused expert gating of mixture-of-experts models: gate
probabilities, arg-top-k, the chosen experts' weights, optional norm and scale)."""
from __future__ import annotations


from typing import Any

import numpy as np

from .catalog import Family, register, Since
from .elementwise import clamp, sqrt
from .graph import Tensor, add, cast, cont, div, new_op, permute, reshape, scale, unary, view
from .inputs import shape_of, shuffled_rows
from .movement import get_rows
from .reduce import SORT_DESC, argsort, sum_rows
from .softmax import soft_max_ext
from .types import F16, F32, I32


# --- constructors (ggml.c) ---

def top_k(a: Tensor, k: int) -> Tensor:
    """ggml_top_k: per row of a, the indices of its k largest values, in no set order."""
    assert a.ne[0] >= k
    return new_op(a.graph, "TOP_K", I32, [k, *a.ne[1:]], [a])


def argsort_top_k(a: Tensor, k: int) -> Tensor:
    """ggml_argsort_top_k: a descending ARGSORT, then a view of its first k columns."""
    assert a.ne[0] >= k
    s = argsort(a, SORT_DESC)
    return view(s, [k, *s.ne[1:]], s.nb[1:], 0)


# --- test_top_k ---

def jdst(a: np.ndarray, b: np.ndarray) -> float:
    """test-backend-ops' jdst: how far the multisets of a's and b's values are apart, in [0, 1]."""
    values, inv = np.unique(np.concatenate([a, b]), return_inverse=True)
    ca = np.bincount(inv[:a.size], minlength=values.size)
    cb = np.bincount(inv[a.size:], minlength=values.size)
    return float(np.abs(ca - cb).sum()) / (2 * a.size) if a.size else 0.0


def top_k_err(ref, out, p, src) -> float:
    """test_top_k::err: without ties, the index values must be integers and the same multiset
    over the whole output (order free); with ties, each row's indices must pick the same
    multiset of source values, without repeating an index."""
    k, n0 = p["k"], p["ne"][0]
    if not p["ties"]:
        ia, ib = ref.astype(np.int32), out.astype(np.int32)
        return float(np.abs(ref - ia).sum() + np.abs(out - ib).sum()) + jdst(ia, ib)
    rows = np.asarray(src, np.float32).reshape(-1, n0)
    ia, ib = ref.astype(np.int64).reshape(-1, k), out.astype(np.int64).reshape(-1, k)
    if ((ib < 0) | (ib >= n0)).any():
        return float(ib.size)   # indices outside the row: as bad as it gets
    diff = 0.0
    for r in range(rows.shape[0]):
        diff += jdst(rows[r, ia[r]], rows[r, ib[r]])
        diff += (len(set(ia[r].tolist())) < k) + (len(set(ib[r].tolist())) < k)
    return diff


def init_top_k(t, rng, p):
    """Each row a shuffle of 0..ne0-1; with ties, of i // d (every value d times, d = k/2
    clamped to [1, 10])."""
    vals = np.arange(t.ne[0])
    if p["ties"]:
        vals = vals // max(1, min(10, p["k"] // 2))
    return shuffled_rows(rng, vals.astype(np.float32), t.nrows()).reshape(shape_of(t))


def build_top_k(g, type, ne, k, ties):
    out = top_k(g.new_tensor(type, ne, "a"), k)
    out.name = "out"
    return out


def _tk(ne, k, ties=False):
    return dict(type="f32", ne=list(ne), k=k, ties=ties)


def top_k_grid(ties: bool):
    cases = []
    if ties:
        cases += [_tk([n, 2, 1, 3], k, True) for n in range(1, 5) for k in range(1, n + 1)]
    for i in range(20):
        for k in (1, 2, 3, 7, 15, 100, 500, 1023, 9999):
            if k <= 1 << i:
                if not ties:
                    cases += [_tk([1 << i, 1, 1, 1], k), _tk([(1 << i) + 11, 1, 2, 1], k)]
                else:
                    cases.append(_tk([(1 << i) + 11, 1, 2, 1], k, True))
    if not ties:
        for k in (1, 2, 3, 7, 15):
            cases += [_tk(ne, k) for ne in ([16, 10, 10, 10], [60, 10, 10, 10], [1023, 2, 1, 3],
                                            [1024, 2, 1, 3], [1025, 2, 1, 3], [16384, 1, 1, 1],
                                            [2047, 2, 1, 3], [2048, 2, 1, 3], [2049, 2, 1, 3])]
    # [16384,1,1,1] with k <= 15 comes twice (i = 14 above): each name once
    return list({repr(c): c for c in cases}.values())


def top_k_0_25_3(ties: bool):
    """0.25.3: small k over vocabulary-sized rows (and 8192 / 8193), and large k (qwen4exp)."""
    vocab = [(202048, True), (151936, False), (8192, True), (8193, False)]
    cases = [_tk([cols, nrows, 1, 1], k, ties) for k in (4, 8, 16, 32) for nrows in (1, 8, 16)
             for cols, with_ties in vocab if with_ties or not ties]
    large = ([1024, 1, 1, 1], 1024), ([2048, 2, 1, 1], 1024), ([4096, 1, 1, 1], 2048), \
        ([8192, 2, 1, 1], 2051), ([33024, 1, 1, 1], 2051), ([33024, 4, 1, 1], 2051)
    large_ties = ([8192, 2, 1, 1], 2051), ([33024, 4, 1, 1], 2051)
    return cases + [_tk(ne, k, ties) for ne, k in (large_ties if ties else large)]


TOP_K: dict[str, Any] = dict(build=build_top_k, vars=("type", "ne", "k", "ties"), op="TOP_K", init=init_top_k,
             max_nmse=0.0, err=top_k_err, err_name="err", err_srcs=True)

register(Family(
    name="top_k",
    eval_grid=lambda: top_k_grid(False),
    changes=(Since("0.25.3", add=lambda: top_k_0_25_3(False)),),
    perf_grid=lambda: [_tk([2, 1, 1, 1], 1)] + [
        _tk([cols, nrows, 1, 1], k) for k in (1, 10, 40, 400) for nrows in (1, 16)
        for cols in (k, 1000, 65000, 200000)],
    **TOP_K,
))

# with ties test-backend-ops checks the whole graph's result only (run_whole_graph): test mode
register(Family(name="top_k_ties", eval_grid=lambda: top_k_grid(True), fused=True, **TOP_K,
                changes=(Since("0.25.3", add=lambda: top_k_0_25_3(True)),)))


# --- test_topk_qsa (0.25.3): Qwen's query-sparse attention picks its KV cells ---

def build_topk_qsa(g, n_blocks, n_kv, n_tps, n_stream, width):
    """Each KV cell's score is its block's (GET_ROWS by the cell -> block map, through
    transposes) plus the mask; TOP_K keeps `width` cells. Checked on the TOP_K only."""
    score = g.new_tensor(F32, [n_blocks, n_tps, n_stream], "score")
    cell_blk = g.new_tensor(I32, [n_kv, n_stream], "cell_blk")
    kq_mask = g.new_tensor(F16, [n_kv, n_tps, n_stream], "kq_mask")
    e = get_rows(cont(permute(score, 1, 0, 2, 3)), cell_blk)
    e = cont(permute(e, 1, 0, 2, 3))
    e = add(e, reshape(cast(kq_mask, F32), [n_kv, n_tps, n_stream]))
    out = top_k(e, width)
    out.name = "out"
    g.check_nodes = [out]   # fusion_test_nodes
    return out


def init_topk_qsa(t, rng, p):
    """Block ids uniform in [0, n_blocks), a mask ramp 0, 1, ... per row and scores in
    [0, 0.5): every cell's value distinct, so the top k has no ties."""
    if t.type == I32:
        return rng.integers(0, p["n_blocks"], size=shape_of(t))
    if t.type == F16:
        return np.broadcast_to(np.arange(t.ne[0], dtype=np.float32), shape_of(t))
    return rng.uniform(0.0, 0.5, size=shape_of(t)).astype(np.float32)


def topk_qsa_err(ref, out, p) -> float:
    """test_topk_qsa::err: the index multisets (order free), integers only."""
    ia, ib = ref.astype(np.int32), out.astype(np.int32)
    return float(np.abs(ref - ia).sum() + np.abs(out - ib).sum()) + jdst(ia, ib)


register(Family(
    name="topk_qsa", build=build_topk_qsa, vars=("n_blocks", "n_kv", "n_tps", "n_stream", "width"),
    op="TOPK_QSA", init=init_topk_qsa, max_nmse=0.0, err=topk_qsa_err, err_name="err",
    fused=True, since="0.25.3",
    # the fused path's shapes, two streams, and a small k (the unfused fallback)
    eval_grid=lambda: [dict(n_blocks=b, n_kv=kv, n_tps=t, n_stream=s, width=w) for b, kv, t, s, w in (
        (512, 2048, 1, 1, 1500), (512, 2048, 2, 1, 1500), (256, 2048, 4, 2, 2000), (64, 256, 2, 1, 200))],
))


# --- test_topk_moe ---

GATING_SOFTMAX, GATING_SIGMOID, GATING_SOFTMAX_WEIGHT, GATING_SQRT_SOFTPLUS = range(4)


def build_topk_moe(g, ne, n_expert_used, with_norm, bias_probs, gating_func, scale_w):
    n_expert, n_tokens, k = ne[0], ne[1], n_expert_used
    logits = g.new_tensor("f32", ne, "logits")
    if gating_func == GATING_SOFTMAX:
        probs = soft_max_ext(logits)
    elif gating_func == GATING_SIGMOID:
        probs = unary(logits, "SIGMOID")
    elif gating_func == GATING_SQRT_SOFTPLUS:
        probs = sqrt(unary(logits, "SOFTPLUS"))
    else:
        probs = logits
    probs.name = "probs"
    selection_probs = probs
    if bias_probs:
        selection_probs = add(probs, g.new_tensor("f32", [n_expert], "exp_probs_b"))
        selection_probs.name = "selection_probs"
    selected_experts = argsort_top_k(selection_probs, k)      # [k, n_tokens]
    selected_experts.name = "selected_experts"
    weights = get_rows(reshape(probs, [1, n_expert, n_tokens]), selected_experts)   # [1, k, n_tokens]
    if gating_func == GATING_SOFTMAX_WEIGHT:
        weights = reshape(soft_max_ext(reshape(weights, [k, n_tokens])), [1, k, n_tokens])
    if with_norm:
        weights = reshape(weights, [k, n_tokens])
        weights_sum = sum_rows(weights)
        weights_sum.name = "weights_sum"
        weights = reshape(div(weights, clamp(weights_sum, 6.103515625e-5, float("inf"))), [1, k, n_tokens])
    if scale_w:
        weights = scale(weights, scale_w)
    weights.name = "weights"
    g.check_nodes = [selected_experts, weights]   # fusion_test_nodes
    return weights


def sorted_nmse(ref, out, p) -> float:
    """test_topk_moe::err: the NMSE of both outputs sorted (expert order is free)."""
    r, o = np.sort(ref.astype(np.float64)), np.sort(out.astype(np.float64))
    den = float(np.sum(r * r))
    num = float(np.sum((r - o) ** 2))
    return num / den if den else (0.0 if num == 0 else float("inf"))


def topk_moe_grid(shapes=()):
    cases = []
    for gate in range(4):
        for with_norm in (False, True):
            for bias_probs in (False, True):
                for scale_w in (0.0, 2.0):
                    for ne, k in (([8, 22], 4), ([31, 22], 8), ([32, 22], 8), ([40, 22], 8), ([71, 22], 8),
                                  ([128, 1], 128), ([129, 1], 128), ([160, 4], 160),
                                  ([256, 22], 6),     # DeepSeek-V4
                                  ([288, 22], 8),     # StepFun 3.7
                                  *shapes):
                        cases.append(dict(ne=ne + [1, 1], n_expert_used=k, with_norm=with_norm,
                                          bias_probs=bias_probs, gating_func=gate, scale_w=scale_w))
    return cases


register(Family(
    name="topk_moe",
    build=build_topk_moe,
    vars=("ne", "n_expert_used", "with_norm", "bias_probs", "gating_func", "scale_w"),
    op="TOPK_MOE",
    eval_grid=topk_moe_grid,
    # 0.25.3: rows at and just past the limit where one block still covers all rows
    changes=(Since("0.25.3", drop=lambda p: True,
                   add=lambda: topk_moe_grid((([32, 8], 4), ([32, 8], 8), ([32, 9], 8)))),),
    err=sorted_nmse,
    fused=True,
))
