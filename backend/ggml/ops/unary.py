"""Replays of the unary / element-wise / GLU family ops through ggml's own constructors
(plain UNARY, ADD, MUL and SCALE are replayed in core.py)."""
from __future__ import annotations

from cannops.cases.graph import GLU_OPS
from cannops.cases.unary import xielu_args

from ..library import TooOld
from . import replay

_SIMPLE = {"SQR": "ggml_sqr", "SQRT": "ggml_sqrt", "LOG": "ggml_log", "SIN": "ggml_sin", "COS": "ggml_cos"}


@replay(*_SIMPLE)
def _simple(lib, ctx, node, srcs):
    return getattr(lib, _SIMPLE[node.op])(ctx, srcs[0])


@replay("UNARY:XIELU")
def _xielu(lib, ctx, node, srcs):
    return lib.ggml_xielu(ctx, srcs[0], *xielu_args(node))


@replay("CLAMP")
def _clamp(lib, ctx, node, srcs):
    # The case graph says in place or not (cases/elementwise.clamp, by catalog version);
    # the ggml run may be of another version: v0.20.2's ggml_clamp builds a view of its
    # source, 0.25.3's a new tensor, and its ggml_clamp_inplace (new there) the view.
    in_place = node.view_src is not None
    if in_place and hasattr(lib, "ggml_clamp_inplace"):
        return lib.ggml_clamp_inplace(ctx, srcs[0], node.param_f32(0), node.param_f32(1))
    if not in_place and not hasattr(lib, "ggml_clamp_inplace"):
        raise TooOld("this ggml's ggml_clamp is in place (before 0.25.3): it cannot "
                          "build the case's CLAMP into a new tensor")
    return lib.ggml_clamp(ctx, srcs[0], node.param_f32(0), node.param_f32(1))


@replay("LEAKY_RELU")
def _leaky_relu(lib, ctx, node, srcs):
    # test_leaky_relu builds it in place: the result is then a view of its source
    return lib.ggml_leaky_relu(ctx, srcs[0], node.param_f32(0), node.view_src is not None)


@replay("GLU")
def _glu(lib, ctx, node, srcs):
    op = node.param_i32(0)
    b = srcs[1] if len(srcs) > 1 else lib.ffi.NULL
    if GLU_OPS[op] == "SWIGLU_OAI":
        return lib.ggml_swiglu_oai(ctx, srcs[0], b, node.param_f32(2), node.param_f32(3))
    if GLU_OPS[op] == "SWIGLU_CLAMP":   # ggml 0.25.3 on
        if not hasattr(lib, "ggml_swiglu_clamp"):
            raise TooOld("this ggml has no ggml_swiglu_clamp (0.25.3 on)")
        return lib.ggml_swiglu_clamp(ctx, srcs[0], b, node.param_f32(3))
    if len(srcs) > 1:
        return lib.ggml_glu_split(ctx, srcs[0], b, op)
    return lib.ggml_glu(ctx, srcs[0], op, bool(node.param_i32(1)))
