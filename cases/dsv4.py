"""DeepSeek-V4 hyper-connections (hc = 4 residual streams per token): test_dsv4_hc_comb
(DSV4_HC_COMB: the stream-mixing matrix, a softmax then Sinkhorn normalisation),
test_dsv4_hc_pre (DSV4_HC_PRE: streams -> one layer input) and test_dsv4_hc_post
(DSV4_HC_POST: layer output and mixed streams -> new streams)."""
from __future__ import annotations

from .catalog import Family, new_params, register, Since
from .graph import Tensor, new_op, scale, unary
from .inputs import uniform_by_name
from .types import F32

HC = 4


def dsv4_hc_comb(mixes: Tensor, scale: Tensor, base: Tensor, eps: float, n_iter: int) -> Tensor:
    """ggml_dsv4_hc_comb: mixes {(2+hc)*hc, n_tokens}, scale {>=3}, base {(2+hc)*hc} ->
    {hc, hc, n_tokens}; op_params = [eps (f32), n_iter]."""
    assert all(t.type == F32 for t in (mixes, scale, base)) and n_iter > 0
    dim = mixes.ne[0]
    assert dim == (2 + HC) * HC and mixes.ne[2] == mixes.ne[3] == 1
    assert scale.ne[0] >= 3 and scale.ne[1:] == (1, 1, 1) and base.ne == (dim, 1, 1, 1)
    t = new_op(mixes.graph, "DSV4_HC_COMB", F32, [HC, HC, mixes.ne[1]], [mixes, scale, base], f32=[eps])
    t.set_params_i32([n_iter], 1)
    return t


def dsv4_hc_pre(x: Tensor, weights: Tensor, scale: float = 1.0, gated: bool = False) -> Tensor:
    """ggml_dsv4_hc_pre: x {n_embd, hc, n_tokens}, weights {hc, n_tokens} -> {n_embd, n_tokens};
    gated (ggml_dsv4_hc_pre_gated, 0.25.3): a gate {n_embd, hc, n_tokens} in place of the
    weights, each stream weighted by sigmoid(gate) element by element, the sum times scale."""
    n_embd, hc, n_tokens = x.ne[:3]
    assert x.type == F32 and weights.type == F32 and x.ne[3] == 1
    assert weights.ne == ((n_embd, hc, n_tokens, 1) if gated else (hc, n_tokens, 1, 1))
    if x.graph.ggml_at_least("0.25.3"):   # op_params = [scale (f32), gated]
        t = new_op(x.graph, "DSV4_HC_PRE", F32, [n_embd, n_tokens], [x, weights], f32=[scale])
        t.set_params_i32([int(gated)], 1)
        return t
    assert scale == 1.0 and not gated
    return new_op(x.graph, "DSV4_HC_PRE", F32, [n_embd, n_tokens], [x, weights])


def dsv4_hc_post(x: Tensor, residual: Tensor, post: Tensor, comb: Tensor | None) -> Tensor:
    """ggml_dsv4_hc_post: x {n_embd, n_tokens}, residual {n_embd, hc, n_tokens}, post
    {hc, n_tokens}, comb {hc, hc, n_tokens} (0.25.3: or none, the identity) -> {n_embd, hc,
    n_tokens}."""
    assert all(t.type == F32 for t in (x, residual, post) + ((comb,) if comb else ()))
    n_embd, n_tokens = x.ne[:2]
    hc = residual.ne[1]
    assert x.ne[2:] == (1, 1) and residual.ne == (n_embd, hc, n_tokens, 1)
    assert post.ne == (hc, n_tokens, 1, 1) and (comb is None or comb.ne == (hc, hc, n_tokens, 1))
    return new_op(x.graph, "DSV4_HC_POST", F32, [n_embd, hc, n_tokens],
                  [x, residual, post] + ([comb] if comb else []))


# test_dsv4_hc's per-name ranges (any other leaf: uniform [-1, 1])
RANGES = {"mixes": (-2.0, 2.0), "scale": (-0.5, 0.5), "base": (-0.25, 0.25), "weights": (0.0, 1.0),
          "comb": (0.0, 1.0), "post": (0.0, 2.0), "x": (-1.0, 1.0), "residual": (-1.0, 1.0),
          "gate": (-4.0, 4.0)}


init_by_name = uniform_by_name(RANGES)


def build_comb(g, n_tokens, n_iter, eps):
    mixes = g.new_tensor(F32, [(2 + HC) * HC, n_tokens], "mixes")
    return dsv4_hc_comb(mixes, g.new_tensor(F32, [3], "scale"), g.new_tensor(F32, [(2 + HC) * HC], "base"),
                        eps, n_iter)


def build_pre(g, n_embd, n_tokens, n_hc=HC, gated=False):
    """0.25.3: other stream counts (n_hc), and the gated form with scale 1/n_hc."""
    x = g.new_tensor(F32, [n_embd, n_hc, n_tokens], "x")
    if gated:
        return dsv4_hc_pre(x, g.new_tensor(F32, [n_embd, n_hc, n_tokens], "gate"), 1.0 / n_hc, True)
    return dsv4_hc_pre(x, g.new_tensor(F32, [n_hc, n_tokens], "weights"))


def build_post(g, n_embd, n_tokens, identity=False, gated=False):
    """0.25.3: no comb (identity), and post gated as qwen4exp builds it: 2 sigmoid(post / hc)."""
    post = g.new_tensor(F32, [HC, n_tokens], "post")
    if gated:
        post = scale(unary(scale(post, 1.0 / HC), "SIGMOID"), 2.0)
    return dsv4_hc_post(g.new_tensor(F32, [n_embd, n_tokens], "x"),
                        g.new_tensor(F32, [n_embd, HC, n_tokens], "residual"), post,
                        None if identity else g.new_tensor(F32, [HC, HC, n_tokens], "comb"))


SHAPES = ((1, 1), (31, 17), (128, 257), (4096, 21))  # (n_embd, n_tokens)

register(Family(
    name="dsv4_hc_comb", build=build_comb, vars=("n_tokens", "n_iter", "eps"), op="DSV4_HC_COMB",
    eval_grid=lambda: [dict(n_tokens=t, n_iter=i, eps=1e-6) for t, i in ((1, 1), (17, 4), (257, 8), (17, 20))],
    # 0.25.3: DeepSeek-V4's n_iter over batch sizes across subgroup and workgroup bounds
    changes=(Since("0.25.3", add=lambda: [dict(n_tokens=t, n_iter=20, eps=1e-6)
                                          for t in (1, 256, 336, 512, 513, 1024, 2048)]),),
    init=init_by_name,
))
register(Family(
    name="dsv4_hc_pre", build=build_pre, vars=("n_embd", "n_tokens"), op="DSV4_HC_PRE",
    eval_grid=lambda: [dict(n_embd=e, n_tokens=t) for e, t in SHAPES], init=init_by_name,
    changes=(Since("0.25.3", defaults=dict(n_hc=HC, gated=False),
                   add=lambda: [dict(n_embd=e, n_tokens=t, n_hc=4, gated=True) for e, t in ((31, 17), (4096, 21))]
                   + [dict(n_embd=128, n_tokens=17, n_hc=h, gated=gt) for h in (1, 2, 3, 5, 8, 65)
                      for gt in (False, True)],
                   fields=dict(vars=("n_embd", "n_hc", "n_tokens", "gated"))),),
))
POST_VARS = ("n_embd", "n_tokens", "identity", "gated")
register(Family(
    name="dsv4_hc_post", build=build_post, vars=("n_embd", "n_tokens"), op="DSV4_HC_POST",
    eval_grid=lambda: [dict(n_embd=e, n_tokens=t) for e, t in SHAPES], init=init_by_name,
    changes=(new_params("0.25.3", ("n_embd", "n_tokens"), identity=False, gated=False,
                        add=lambda: [dict(n_embd=e, n_tokens=t, identity=True) for e, t in ((31, 17), (4096, 21))]),),
))
# gated: test-backend-ops checks the chain's result only (run_whole_graph)
register(Family(
    name="dsv4_hc_post_gated", build=build_post, vars=POST_VARS, op="DSV4_HC_POST", init=init_by_name,
    fused=True, since="0.25.3",
    eval_grid=lambda: [dict(n_embd=e, n_tokens=t, identity=i, gated=True)
                       for e, t, i in ((31, 17, True), (2560, 21, True), (31, 17, False))],
))
