"""Element-wise unary ops: test_unary (GGML_OP_UNARY with each ggml_unary_op), test_xielu,
and the fused test-mode chains test_relu_sqr (RELU_SQR) and test_unary_mul (SILU_MUL & co)."""
from __future__ import annotations

import numpy as np

from .catalog import EVERY_DEVICE, Family, fd_limit, register, Since, Tolerance
from .elementwise import sqr
from .graph import UNARY_OPS, add, leaf_or_view, mul, new_op, set_param, unary, view
from .inputs import uniform
from .implementations import GGML_CPU

SHAPES = ([128, 2, 2, 2], [5, 7, 11, 13])


def view_or_leaf(g, type, ne_a, v, name="a", grow=(3, 2, 5, 4), param=False):
    """The input `a` (a gradient parameter with `param`), or with v=1 a non-contiguous view
    into a larger tensor."""
    return leaf_or_view(g, type, ne_a, name, grow if v & 1 else None, param)


# the unary ops with a backward in ggml (test_unary's grad_supported)
WITH_GRAD = frozenset({"ABS", "SGN", "NEG", "STEP", "RELU", "SILU", "EXPM1", "SOFTPLUS"})
# non-smooth gradients: finite differences are trusted only where they hit these values
GRAD_EXPECT = {"ABS": (-1.0, 1.0), "SGN": (0.0,), "STEP": (0.0,), "RELU": (0.0, 1.0)}


# ggml's CPU evaluates the f32 GELU and GELU_QUICK activations (GEGLU's and GEGLU_QUICK's
# too) through a table of f16 values: the input and the result are rounded to f16
def f16_gelu_table(when) -> Tolerance:
    return Tolerance(
        "ggml-CPU computes GELU / GELU_QUICK through an f16 table (GGML_GELU_FP16, "
        "GGML_GELU_QUICK_FP16): the input rounded to f16 moves the result by |x f'(x)| 2^-11, "
        "up to 2^-8 relative on the negative tail, and the gated forms multiply an f16 "
        "activation (~0 there) by gates up to 150; summed on (a fused bias), that error is one "
        "of the row's magnitude", rtol=2 ** -7, atol=1e-4, atol_rms=2 ** -9, impl=GGML_CPU,
        when=when)


F16_GELU_TABLE = f16_gelu_table(lambda p: p["op"] in ("GELU", "GELU_QUICK", "GEGLU", "GEGLU_QUICK"))


def build_unary(g, op, type, ne_a, v):
    return unary(view_or_leaf(g, type, ne_a, v, param=op in WITH_GRAD), op)


def init_unary(t, rng, p):
    # wide range to catch NaNs in GELU & co; f16 exp/expm1 kept finite
    lim = 10.0 if p["type"] == "f16" and p["op"] in ("EXP", "EXPM1") else 150.0
    return uniform(t, rng, -lim, lim)


def grid_unary(types):
    return [dict(op=op, type=type, ne_a=ne, v=v)
            for type in types for v in (0, 1) for op in UNARY_OPS if op != "XIELU" for ne in SHAPES]


register(Family(
    name="unary",
    build=build_unary,
    vars=("type", "ne_a", "v"),
    op=lambda p: p["op"],
    init=init_unary,
    grad_eps=15.0,
    grad_expect=lambda p: GRAD_EXPECT.get(p["op"], ()),
    grad_notes={EVERY_DEVICE: fd_limit(
        "f32 inputs span [-150, 150] (to catch NaNs in GELU & co) and exp(x) overflows float32 "
        "above 88.72: the true gradient there is +inf", nonfinite=True,
        when=lambda p: p["op"] == "EXPM1" and p["type"] == "f32")},
    strict=(F16_GELU_TABLE,),
    eval_grid=lambda: grid_unary(("f16", "f32")),
    changes=(Since("0.25.3", add=lambda: grid_unary(("bf16",))),),   # bf16 activations
))


# --- test_xielu: UNARY XIELU, whose parameters go into op_params ---

def softplus_f32(x: float) -> float:
    """ggml_compute_softplus_f32, in f32 as ggml packs it."""
    x = np.float32(x)
    return float(x if x > 20 else np.log(np.float32(1) + np.exp(x)))


def xielu(a, alpha_n, alpha_p, beta, eps):
    """ggml_xielu: op_params = [XIELU, beta + softplus(alpha_n), softplus(alpha_p), beta, eps]."""
    t = new_op(a.graph, "UNARY", a.type, a.ne, [a], i32=[UNARY_OPS.index("XIELU")])
    t.set_params_f32([float(np.float32(beta) + np.float32(softplus_f32(alpha_n))),
                      softplus_f32(alpha_p), beta, eps], start=1)
    return t


def xielu_args(t):
    """(alpha_n, alpha_p, beta, eps) that make ggml_xielu pack t's op_params (for replays):
    softplus inverted in f64, then the f32 neighbour that packs back to the same bits."""
    beta, eps = t.param_f32(3), t.param_f32(4)

    def unpack(softplus_value, target, pack):
        s = np.float64(softplus_value)
        y = np.float32(s if s > 20 else np.log(np.expm1(s)))
        for cand in (y, np.nextafter(y, np.float32(np.inf)), np.nextafter(y, np.float32(-np.inf))):
            if np.float32(pack(float(cand))) == np.float32(target):
                return float(cand)
        return float(y)

    p1, p2 = t.param_f32(1), t.param_f32(2)
    alpha_n = unpack(p1 - beta, p1, lambda x: np.float32(beta) + np.float32(softplus_f32(x)))
    alpha_p = unpack(p2, p2, softplus_f32)
    return alpha_n, alpha_p, beta, eps


register(Family(
    name="xielu",
    build=lambda g, type, ne: xielu(set_param(g.new_tensor(type, ne, "a")), 4.0, 20.0, 0.5, 1e-7),
    vars=("type", "ne"),
    op="XIELU",
    eval_grid=lambda: (dict(type=t, ne=ne) for ne in ([10, 5, 4, 3], [512, 16, 1, 1])
                       for t in ("f32", "f16")),
))


# --- fused test-mode cases (checked on their final output only) ---

def build_relu_sqr(g, type, ne):
    return sqr(unary(g.new_tensor(type, ne, "a"), "RELU"))


register(Family(
    name="relu_sqr",
    build=build_relu_sqr,
    vars=("type", "ne"),
    op="RELU_SQR",
    fused=True,
    eval_grid=lambda: (dict(type=t, ne=ne) for t in ("f16", "f32") for ne in SHAPES),
))


def padded(g, type, ne, name, grow, offset_elems=0):
    """`ne` viewed out of a tensor `grow` times larger per dim (rows keep their stride)."""
    big = g.new_tensor(type, [n * k for n, k in zip(ne, grow)], name)
    return view(big, ne, big.nb[1:], offset_elems * big.nb[0])


def build_unary_mul(g, op, type, ne, swap, layout, tail):
    """test_unary_mul: unary(a) * b in several operand layouts, plus an optional consumer."""
    if layout == "packed":
        a, b = g.new_tensor(type, ne, "a"), g.new_tensor(type, ne, "b")
    elif layout == "pad_unary":
        a, b = padded(g, type, ne, "a", (3, 1, 1, 1)), g.new_tensor(type, ne, "b")
    elif layout == "pad_other":
        a, b = g.new_tensor(type, ne, "a"), padded(g, type, ne, "b", (3, 1, 1, 1))
    elif layout == "halves":  # one tensor split in two along dim 0: b first, a second
        base = g.new_tensor(type, [2 * ne[0]] + list(ne[1:]), "base")
        b = view(base, ne, base.nb[1:], 0)
        a = view(base, ne, base.nb[1:], ne[0] * base.nb[0])
    elif layout == "strided_dim1":
        a, b = padded(g, type, ne, "a", (1, 3, 1, 1)), g.new_tensor(type, ne, "b")
    elif layout == "bcast":
        a, b = g.new_tensor(type, ne, "a"), g.new_tensor(type, [ne[0], 1, 1, 1], "b")
    elif layout == "rep_ne0":   # 0.25.3: b repeated along dim 0
        a, b = g.new_tensor(type, ne, "a"), g.new_tensor(type, [ne[0] // 4] + list(ne[1:]), "b")
    elif layout == "view_mid":  # 0.25.3: b a view, its node between the unary and the MUL
        a, b = g.new_tensor(type, ne, "a"), None
    elif layout == "gate":      # 0.25.3: a one-element-per-row gate, broadcast over b
        a, b = g.new_tensor(type, [1] + list(ne[1:]), "a"), g.new_tensor(type, ne, "b")
    else:
        raise ValueError(layout)
    u = unary(a, op)
    if layout == "view_mid":
        b = padded(g, type, ne, "base", (2, 1, 1, 1))
        b.name = "b"
    second = layout == "gate" or swap and layout not in ("bcast", "view_mid")
    out = mul(b, u) if second else mul(u, b)
    if tail == "reuse":
        out = add(out, u)
    elif tail == "consumer":
        out = add(out, b)
    return out


def grid_unary_mul(ops=("SILU", "SIGMOID", "SOFTPLUS"), types=("f16", "f32"), later=()):
    base = [128, 2, 2, 2]
    for op in ops:
        for t in types:
            variants = [(base, False, "packed", ""), (base, True, "packed", ""),
                        ([5, 7, 11, 13], False, "packed", ""), (base, False, "pad_unary", ""),
                        (base, True, "pad_other", ""), (base, True, "halves", ""),
                        (base, False, "packed", "consumer"), (base, False, "strided_dim1", ""),
                        (base, False, "bcast", ""), *later, (base, False, "packed", "reuse")]
            for ne, swap, layout, tail in variants:
                yield dict(op=op, type=t, ne=ne, swap=swap, layout=layout, tail=tail)


def grid_unary_mul_0_25_3():
    """0.25.3: GELU too, bf16 too, and three more layouts (b repeated on dim 0, a view
    between the ops, a broadcast gate)."""
    base = [128, 2, 2, 2]
    return grid_unary_mul(("GELU", "SILU", "SIGMOID", "SOFTPLUS"), ("f16", "f32", "bf16"),
                          [(base, False, layout, "") for layout in ("rep_ne0", "view_mid", "gate")])


register(Family(
    name="unary_mul",
    build=build_unary_mul,
    vars=("type", "ne", "swap", "layout", "tail"),
    op=lambda p: p["op"] + "_MUL",
    fused=True,
    # the fused kernels skip the f16 / bf16 rounding of the unary result that the op chain
    # does; ggml-CPU's f32 GELU is an f16 table (0.25.3's thresholds)
    max_nmse=lambda p: {"f16": 5e-5, "bf16": 1e-4}.get(p["type"], 5e-7 if p["op"] == "GELU" else 1e-7),
    eval_grid=grid_unary_mul,
    changes=(Since("0.25.3", add=grid_unary_mul_0_25_3),),
))
