"""Element-wise unary ops (test_unary): GGML_OP_UNARY with each ggml_unary_op."""
from __future__ import annotations

from .catalog import Family, register
from .graph import UNARY_OPS, unary, view
from .inputs import uniform

SHAPES = ([128, 2, 2, 2], [5, 7, 11, 13])


def view_or_leaf(g, type, ne_a, v, name="a", grow=(3, 2, 5, 4)):
    """The input `a`, or with v=1 a non-contiguous view into a larger tensor."""
    if v & 1:
        big = g.new_tensor(type, [n * k for n, k in zip(ne_a, grow)], name)
        a = view(big, ne_a, big.nb[1:], 0)
        a.name = f"view_of_{name}"
        return a
    return g.new_tensor(type, ne_a, name)


def build_unary(g, op, type, ne_a, v):
    return unary(view_or_leaf(g, type, ne_a, v), op)


def init_unary(t, rng, p):
    # wide range to catch NaNs in GELU & co; f16 exp/expm1 kept finite
    lim = 10.0 if p["type"] == "f16" and p["op"] in ("EXP", "EXPM1") else 150.0
    return uniform(t, rng, -lim, lim)


register(Family(
    name="unary",
    build=build_unary,
    vars=("type", "ne_a", "v"),
    op=lambda p: p["op"],
    init=init_unary,
    eval_grid=lambda: (
        dict(op=op, type=type, ne_a=ne, v=v)
        for type in ("f16", "f32") for v in (0, 1) for op in UNARY_OPS if op != "XIELU"
        for ne in SHAPES),
))
