"""Replays of the data-movement family (cases/movement.py) through ggml's own constructors
(VIEW, PERMUTE, TRANSPOSE, CONT, DUP and CPY are replayed in core.py)."""
from __future__ import annotations

from . import replay


@replay("REPEAT")
def _repeat(lib, ctx, node, srcs):
    # ggml_repeat(a, b) only takes b's shape: ggml_repeat_4d builds the same node
    return lib.ggml_repeat_4d(ctx, srcs[0], *node.ne)


@replay("REPEAT_BACK")
def _repeat_back(lib, ctx, node, srcs):
    # b gives the shape only and is no source: a stand-in of that shape will do
    shape = lib.ggml_new_tensor(ctx, srcs[0].type, 4, node.ne)
    return lib.ggml_repeat_back(ctx, srcs[0], shape)


@replay("CONCAT")
def _concat(lib, ctx, node, srcs):
    return lib.ggml_concat(ctx, srcs[0], srcs[1], node.param_i32(0))


@replay("GET_ROWS")
def _get_rows(lib, ctx, node, srcs):
    return lib.ggml_get_rows(ctx, srcs[0], srcs[1])


@replay("PAD")
def _pad(lib, ctx, node, srcs):
    fn = lib.ggml_pad_ext_circular if node.param_i32(8) else lib.ggml_pad_ext
    return fn(ctx, srcs[0], *node.params_i32(8))


@replay("PAD_REFLECT_1D")
def _pad_reflect_1d(lib, ctx, node, srcs):
    return lib.ggml_pad_reflect_1d(ctx, srcs[0], node.param_i32(0), node.param_i32(1))


@replay("ROLL")
def _roll(lib, ctx, node, srcs):
    return lib.ggml_roll(ctx, srcs[0], *node.params_i32(4))


@replay("ARANGE")
def _arange(lib, ctx, node, srcs):
    return lib.ggml_arange(ctx, node.param_f32(0), node.param_f32(1), node.param_f32(2))


@replay("FILL")
def _fill(lib, ctx, node, srcs):
    return lib.ggml_fill(ctx, srcs[0], node.param_f32(0))


@replay("TRI")
def _tri(lib, ctx, node, srcs):
    return lib.ggml_tri(ctx, srcs[0], node.param_i32(0))


@replay("DIAG")
def _diag(lib, ctx, node, srcs):
    return lib.ggml_diag(ctx, srcs[0])


@replay("DIAG_MASK_INF")
def _diag_mask_inf(lib, ctx, node, srcs):
    return lib.ggml_diag_mask_inf(ctx, srcs[0], node.param_i32(0))
