"""Replays of the direct convolutions and the transposed ones."""
from __future__ import annotations

from . import replay


def _params(node, n):
    return [node.param_i32(i) for i in range(n)]


@replay("CONV_2D")
def _conv_2d(lib, ctx, node, srcs):
    return lib.ggml_conv_2d_direct(ctx, srcs[0], srcs[1], *_params(node, 6))


@replay("CONV_2D_DW")
def _conv_2d_dw(lib, ctx, node, srcs):
    return lib.ggml_conv_2d_dw_direct(ctx, srcs[0], srcs[1], *_params(node, 6))


@replay("CONV_3D")
def _conv_3d(lib, ctx, node, srcs):
    return lib.ggml_conv_3d_direct(ctx, srcs[0], srcs[1], *_params(node, 12))


@replay("CONV_TRANSPOSE_1D")
def _conv_transpose_1d(lib, ctx, node, srcs):
    return lib.ggml_conv_transpose_1d(ctx, srcs[0], srcs[1], *_params(node, 3))


@replay("CONV_TRANSPOSE_2D")
def _conv_transpose_2d(lib, ctx, node, srcs):
    return lib.ggml_conv_transpose_2d_p0(ctx, srcs[0], srcs[1], node.param_i32(0))
