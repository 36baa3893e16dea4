"""Gated linear units (GGML_OP_GLU): test_glu (one tensor, halves along dim 0),
test_glu_split (gate and value in two tensors), test_swiglu_oai and (0.25.3)
test_swiglu_clamp."""
from __future__ import annotations

from .catalog import Family, register, Since
from .graph import GLU_OPS, new_op
from .inputs import uniform_init
from .unary import F16_GELU_TABLE, SHAPES, view_or_leaf

GROW = (3, 1, 1, 1)  # v=1: a view into a tensor 3x wider in dim 0


def glu(a, op, swapped=False, b=None):
    """ggml_glu_impl: without b, out has half of a's rows (x = first half, g = second half,
    exchanged when swapped); with b, out has a's shape. op_params = [glu_op, swapped]."""
    ne = a.ne if b is not None else (a.ne[0] // 2,) + a.ne[1:]
    srcs = [a] if b is None else [a, b]
    return new_op(a.graph, "GLU", a.type, ne, srcs, i32=[GLU_OPS.index(op), int(swapped)])


def glu_split(a, b, op):
    assert a.ne == b.ne and a.type == b.type
    return glu(a, op, False, b)


def swiglu_clamp(a, b, limit):
    """ggml_swiglu_clamp (0.25.3): a split SWIGLU_CLAMP, limit as f32 in op_params word 3."""
    t = glu_split(a, b, "SWIGLU_CLAMP")
    t.set_params_f32([limit], start=3)
    return t


def swiglu_oai(a, b, alpha, limit):
    """ggml_swiglu_oai: a split SWIGLU_OAI with alpha, limit as f32 in op_params words 2, 3."""
    t = glu_split(a, b, "SWIGLU_OAI")
    t.set_params_f32([alpha, limit], start=2)
    return t


init_wide = uniform_init(-150.0, 150.0)  # wide range: catches NaNs in GELU & co


GATED = [op for op in GLU_OPS if op not in ("SWIGLU_OAI", "SWIGLU_CLAMP")]   # those take params


def grid_glu(types=("f16", "f32")):
    for t in types:
        for v in (0, 1):
            for op in GATED:
                for swapped in (False, True):
                    for ne in SHAPES:
                        yield dict(op=op, type=t, ne_a=ne, v=v, swapped=swapped)


def grid_glu_split(types=("f16", "f32")):
    for t in types:
        for v in (0, 1):
            for op in GATED:
                for ne in SHAPES:
                    yield dict(op=op, type=t, ne_a=ne, v=v)


def perf_swiglu(split):
    """make_test_cases_perf: SWIGLU at a 27B-class FFN width, fused [gate|up] vs split."""
    for t in ("f16", "f32"):
        for n_tokens in (512, 2048):
            if split:
                yield dict(op="SWIGLU", type=t, ne_a=[17408, n_tokens, 1, 1], v=0)
            else:
                yield dict(op="SWIGLU", type=t, ne_a=[2 * 17408, n_tokens, 1, 1], v=0, swapped=False)


register(Family(
    name="glu",
    build=lambda g, op, type, ne_a, v, swapped: glu(view_or_leaf(g, type, ne_a, v, grow=GROW), op, swapped),
    vars=("type", "ne_a", "v", "swapped"),
    op=lambda p: p["op"],
    init=init_wide,
    strict=(F16_GELU_TABLE,),
    eval_grid=grid_glu,
    changes=(Since("0.25.3", add=lambda: grid_glu(("bf16",))),),   # bf16 activations
    perf_grid=lambda: perf_swiglu(split=False),
))

register(Family(
    name="glu_split",
    build=lambda g, op, type, ne_a, v: glu_split(view_or_leaf(g, type, ne_a, v, "a", GROW, param=True),
                                                 view_or_leaf(g, type, ne_a, v, "b", GROW, param=True), op),
    vars=lambda p: f"type={p['type']},ne_a=[{','.join(map(str, p['ne_a']))}],v={p['v']},split",
    op=lambda p: p["op"],
    init=init_wide,
    strict=(F16_GELU_TABLE,),
    eval_grid=grid_glu_split,
    changes=(Since("0.25.3", add=lambda: grid_glu_split(("bf16",))),),
    perf_grid=lambda: perf_swiglu(split=True),
))

register(Family(
    name="swiglu_oai",
    build=lambda g, type, ne_a, v, alpha, limit: swiglu_oai(
        view_or_leaf(g, type, ne_a, v, "a", GROW, param=True), view_or_leaf(g, type, ne_a, v, "b", GROW, param=True),
        alpha, limit),
    vars=("type", "ne_a", "v", "alpha", "limit"),
    op="SWIGLU_OAI",
    init=init_wide,
    eval_grid=lambda: (dict(type="f32", ne_a=[128, 2, 2, 2], v=v, alpha=alpha, limit=limit)
                       for v in (0, 1) for alpha in (0.5, 1.702) for limit in (2.0, 7.0)),
))

register(Family(
    name="swiglu_clamp",
    build=lambda g, type, ne_a, v, limit: swiglu_clamp(
        view_or_leaf(g, type, ne_a, v, "a", GROW, param=True),
        view_or_leaf(g, type, ne_a, v, "b", GROW, param=True), limit),
    vars=("type", "ne_a", "v", "limit"),
    op="SWIGLU_CLAMP",
    init=init_wide,
    since="0.25.3",
    eval_grid=lambda: (dict(type=t, ne_a=[128, 2, 2, 2], v=v, limit=limit)
                       for t in ("f16", "f32") for v in (0, 1) for limit in (2.0, 10.0)),
))
