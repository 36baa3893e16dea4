"""Element-wise ops with their own test structs: test_sqr, test_sqrt, test_log, test_sin,
test_cos, test_clamp, test_leaky_relu, test_floor/ceil/round/trunc, test_scale and the
fused test_softcap (SCALE -> TANH -> SCALE, printed as SOFTCAP)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .catalog import EVERY_DEVICE, Family, fd_limit, register, Since
from .graph import new_op, scale as scale_bias, set_param, unary, view_of
from .inputs import uniform_init

TYPES = ("f16", "f32")


# --- constructors (ggml.c): shape = a's shape; clamp and leaky_relu(inplace) are views of a ---

def sqr(a):
    return new_op(a.graph, "SQR", a.type, a.ne, [a])


def sqrt(a):
    return new_op(a.graph, "SQRT", a.type, a.ne, [a])


def log(a):
    return new_op(a.graph, "LOG", a.type, a.ne, [a])


def sin(a):
    return new_op(a.graph, "SIN", a.type, a.ne, [a])


def cos(a):
    return new_op(a.graph, "COS", a.type, a.ne, [a])


def inplace_op(a, op):
    """ggml_view_tensor(a) turned into an op node: the result overwrites a."""
    return view_of(a, op, a.ne, a.nb)


def clamp(a, lo, hi):
    """ggml_clamp: in place up to ggml 0.25 (a view of a), a new tensor from 0.25.3 on
    (ggml_clamp_inplace keeps the view); op_params = [min, max] (f32)."""
    t = new_op(a.graph, "CLAMP", a.type, a.ne, [a]) if a.graph.ggml_at_least("0.25.3") else inplace_op(a, "CLAMP")
    t.set_params_f32([lo, hi])
    return t


def leaky_relu(a, negative_slope, inplace=False):
    if inplace:
        t = inplace_op(a, "LEAKY_RELU")
    else:
        t = new_op(a.graph, "LEAKY_RELU", a.type, a.ne, [a])
    t.set_params_f32([negative_slope])
    return t


def scale_inplace(a, s, b=0.0):
    """ggml_scale_bias_inplace: op_params = [s, b]."""
    t = inplace_op(a, "SCALE")
    t.set_params_f32([s, b])
    return t


# --- test_sqr .. test_trunc: same shape grid, their own defaults and input ranges ---

def _n(p):
    return int(np.prod(p["ne"]))


# test-backend-ops' gradient settings of these structs (ops grad); every one marks `a`
GRAD: dict[str, dict[str, Any]] = {
    "sqr": dict(grad_eps=lambda p: 0.1 * 0.25 * _n(p)),    # 10% of the expected sum
    "sqrt": dict(grad_eps=20.0, grad_precise=True),
    "log": dict(grad_precise=True),
    "sin": dict(max_maa=1e-3, grad_eps=0.2, grad_precise=True),
    "cos": dict(max_maa=1e-3, grad_eps=0.2, grad_precise=True),
}

SIMPLE = {
    # struct: (printed op, graph builder, default ne, input range or None for [-1, 1])
    "sqr": ("SQR", sqr, [10, 5, 4, 3], None),
    "sqrt": ("SQRT", sqrt, [10, 3, 3, 2], (50.0, 100.0)),
    "log": ("LOG", log, [10, 5, 4, 3], (0.9, 1.1)),
    "sin": ("SIN", sin, [10, 2, 2, 2], (-6.5, 6.5)),
    "cos": ("COS", cos, [10, 2, 2, 2], (-6.5, 6.5)),
    "floor": ("FLOOR", lambda a: unary(a, "FLOOR"), [10, 2, 2, 2], (-10.0, 10.0)),
    "ceil": ("CEIL", lambda a: unary(a, "CEIL"), [10, 2, 2, 2], (-10.0, 10.0)),
    "round": ("ROUND", lambda a: unary(a, "ROUND"), [10, 2, 2, 2], (-10.0, 10.0)),
    "trunc": ("TRUNC", lambda a: unary(a, "TRUNC"), [10, 2, 2, 2], (-10.0, 10.0)),
}
EXTRA_SHAPES = ([7, 1, 5, 3], [1024, 1024, 1, 1])


def _shapes(default):
    return (default,) + EXTRA_SHAPES


def _init_range(lo_hi):
    return None if lo_hi is None else uniform_init(*lo_hi)


def _eval_grid(shapes):
    return lambda: (dict(type=t, ne=ne) for t in TYPES for ne in _shapes(shapes))


for _name, (_op, _fn, _ne, _range) in SIMPLE.items():
    register(Family(
        name=_name,
        build=lambda g, type, ne, _fn=_fn: _fn(set_param(g.new_tensor(type, ne, "a"))),
        vars=("type", "ne"),
        op=_op,
        init=_init_range(_range),
        eval_grid=_eval_grid(_ne),
        **GRAD.get(_name, {}),
    ))

register(Family(
    name="clamp",
    build=lambda g, type, ne, min, max: clamp(g.new_tensor(type, ne, "a"), min, max),
    vars=("type", "ne", "min", "max"),
    op="CLAMP",
    eval_grid=lambda: (dict(type=t, ne=ne, min=-0.5, max=0.5)
                       for t in TYPES for ne in _shapes([10, 5, 4, 3])),
))


def grid_leaky_relu():
    # test-backend-ops also adds test_leaky_relu() (f32, defaults) once more after the
    # loop: the same name twice, listed here once
    for t in TYPES:
        for ne in _shapes([10, 5, 4, 3]):
            yield dict(type=t, ne_a=ne, negative_slope=0.1)


register(Family(
    name="leaky_relu",
    build=lambda g, type, ne_a, negative_slope: leaky_relu(
        g.new_tensor(type, ne_a, "a"), negative_slope, inplace=True),
    vars=("type", "ne_a", "negative_slope"),
    op="LEAKY_RELU",
    eval_grid=grid_leaky_relu,
))


# --- test_scale and the fused test_softcap ---

def build_scale(g, type, ne, scale, bias, inplace):
    a = set_param(g.new_tensor(type, ne, "a"))
    return (scale_inplace if inplace else scale_bias)(a, scale, bias)


register(Family(
    name="scale",
    build=build_scale,
    vars=("type", "ne", "scale", "bias", "inplace"),
    op="SCALE",
    eval_grid=lambda: (
        dict(type="f32", ne=ne, scale=2.0, bias=b, inplace=ip)
        for ne, b, ip in (([10, 10, 10, 10], 0.0, False), ([10, 10, 10, 10], 1.0, False),
                          ([10, 10, 10, 10], 1.0, True), ([100, 10, 10, 10], 1.0, False))),
    changes=(Since("0.25.3", add=lambda: [   # bf16
        dict(type="bf16", ne=ne, scale=s, bias=b, inplace=ip)
        for ne, s, b, ip in (([10, 10, 10, 10], 2.0, 1.0, False), ([10, 10, 10, 10], 2.0, 1.0, True),
                             ([100, 10, 10, 10], 0.5, 0.0, False))]),),
    grad_notes={EVERY_DEVICE: fd_limit(
        "the loss, a float32 sum of about 10^4 (ulp 2^-10), rounds each difference quotient "
        "by up to ulp/(2*eps) = 0.005, against an exact gradient of 2 (= scale)",
        when=lambda p: p["bias"] != 0.0, max_error=2e-3)},
))


def build_softcap(g, type, ne, softcap):
    a = set_param(g.new_tensor(type, ne, "a"))
    inv = float(np.float32(1.0) / np.float32(softcap))  # 1.0f / softcap, in f32
    return scale_bias(unary(scale_bias(a, inv), "TANH"), softcap)


register(Family(
    name="softcap",
    build=build_softcap,
    vars=("type", "ne", "softcap"),
    op="SOFTCAP",
    fused=True,
    eval_grid=lambda: [dict(type="f32", ne=[10, 10, 10, 10], softcap=50.0)],
))
