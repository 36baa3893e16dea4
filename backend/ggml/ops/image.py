"""Replays of IM2COL, IM2COL_3D, COL2IM_1D, POOL_1D, POOL_2D and UPSCALE."""
from __future__ import annotations

from . import replay


@replay("IM2COL")
def _im2col(lib, ctx, node, srcs):
    s0, s1, p0, p1, d0, d1, is_2d = node.params_i32(7)
    return lib.ggml_im2col(ctx, srcs[0], srcs[1], s0, s1, p0, p1, d0, d1, bool(is_2d), node.type.value)


@replay("IM2COL_3D")
def _im2col_3d(lib, ctx, node, srcs):
    s0, s1, s2, p0, p1, p2, d0, d1, d2, ic = node.params_i32(10)
    return lib.ggml_im2col_3d(ctx, srcs[0], srcs[1], ic, s0, s1, s2, p0, p1, p2, d0, d1, d2, node.type.value)


@replay("COL2IM_1D")
def _col2im_1d(lib, ctx, node, srcs):
    return lib.ggml_col2im_1d(ctx, srcs[0], node.param_i32(0), node.param_i32(1), node.param_i32(2))


@replay("POOL_1D")
def _pool_1d(lib, ctx, node, srcs):
    return lib.ggml_pool_1d(ctx, srcs[0], *node.params_i32(4))


@replay("POOL_2D")
def _pool_2d(lib, ctx, node, srcs):
    op, k0, k1, s0, s1, p0, p1 = node.params_i32(7)
    return lib.ggml_pool_2d(ctx, srcs[0], op, k0, k1, s0, s1, float(p0), float(p1))


@replay("UPSCALE")
def _upscale(lib, ctx, node, srcs):
    src, ne, mode = node.src[0], node.ne, node.param_i32(0)
    factor = ne[0] // src.ne[0]
    if factor > 1 and ne == (src.ne[0] * factor, src.ne[1] * factor, src.ne[2], src.ne[3]):
        return lib.ggml_upscale(ctx, srcs[0], factor, mode)     # test_upscale
    return lib.ggml_interpolate(ctx, srcs[0], ne[0], ne[1], ne[2], ne[3], mode)   # test_interpolate
