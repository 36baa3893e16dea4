"""Replays of the core ops: views, copies, unary, binary element-wise, scale.

An op node that is a view of its first source (node.view_src set) was built by the
constructor's _inplace variant: the result overwrites that source."""
from __future__ import annotations

from . import replay


def _fn(lib, name, node):
    return getattr(lib, name + "_inplace" if node.view_src is not None else name)


@replay("VIEW")
def _view(lib, ctx, node, srcs):
    # ggml_view_1d..3d derive the missing strides as our graph.view does: 4d covers all
    ne, nb = node.ne, node.nb
    return lib.ggml_view_4d(ctx, srcs[0], ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3],
                            node.param_u64(0))  # offset within src, as ggml packs it


@replay("RESHAPE")
def _reshape(lib, ctx, node, srcs):
    return lib.ggml_reshape_4d(ctx, srcs[0], *node.ne)


@replay("PERMUTE")
def _permute(lib, ctx, node, srcs):
    return lib.ggml_permute(ctx, srcs[0], *node.params_i32(4))


@replay("TRANSPOSE")
def _transpose(lib, ctx, node, srcs):
    return lib.ggml_transpose(ctx, srcs[0])


@replay("CONT")
def _cont(lib, ctx, node, srcs):
    return lib.ggml_cont_4d(ctx, srcs[0], *node.ne)


@replay("DUP")
def _dup(lib, ctx, node, srcs):
    return _fn(lib, "ggml_dup", node)(ctx, srcs[0])


@replay("CPY")
def _cpy(lib, ctx, node, srcs):
    return lib.ggml_cpy(ctx, srcs[0], srcs[1])


@replay("UNARY")
def _unary(lib, ctx, node, srcs):
    return _fn(lib, "ggml_unary", node)(ctx, srcs[0], node.param_i32(0))


_BINARY = {"ADD": "ggml_add", "SUB": "ggml_sub", "MUL": "ggml_mul", "DIV": "ggml_div"}


@replay(*_BINARY)
def _binary(lib, ctx, node, srcs):
    return _fn(lib, _BINARY[node.op], node)(ctx, srcs[0], srcs[1])


@replay("SCALE")
def _scale(lib, ctx, node, srcs):
    # ggml_scale_bias (a*s + b) covers ggml_scale (b = 0): same op_params
    return _fn(lib, "ggml_scale_bias", node)(ctx, srcs[0], node.param_f32(0), node.param_f32(1))
