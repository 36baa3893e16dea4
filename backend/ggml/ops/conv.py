"""Replays of the direct convolutions and the transposed ones."""
from __future__ import annotations

from . import replay


# the constructors that take (ctx, kernel, input) and then the node's first n op_params
# words in order, as each stores them
_BY_PARAMS = {
    "CONV_2D": ("ggml_conv_2d_direct", 6),
    "CONV_2D_DW": ("ggml_conv_2d_dw_direct", 6),
    "CONV_3D": ("ggml_conv_3d_direct", 12),
    "CONV_TRANSPOSE_1D": ("ggml_conv_transpose_1d", 3),
}


@replay(*_BY_PARAMS)
def _conv(lib, ctx, node, srcs):
    name, n = _BY_PARAMS[node.op]
    return getattr(lib, name)(ctx, srcs[0], srcs[1], *node.params_i32(n))


@replay("CONV_TRANSPOSE_2D")
def _conv_transpose_2d(lib, ctx, node, srcs):
    return lib.ggml_conv_transpose_2d_p0(ctx, srcs[0], srcs[1], node.param_i32(0))
