"""Replays of DSV4_HC_COMB, DSV4_HC_PRE and DSV4_HC_POST."""
from __future__ import annotations

from . import replay


@replay("DSV4_HC_COMB")
def _comb(lib, ctx, node, srcs):
    return lib.ggml_dsv4_hc_comb(ctx, srcs[0], srcs[1], srcs[2], node.param_f32(0), node.param_i32(1))


@replay("DSV4_HC_PRE")
def _pre(lib, ctx, node, srcs):
    if node.param_i32(1):   # 0.25.3: gated
        return lib.ggml_dsv4_hc_pre_gated(ctx, srcs[0], srcs[1], node.param_f32(0))
    return lib.ggml_dsv4_hc_pre(ctx, srcs[0], srcs[1])


@replay("DSV4_HC_POST")
def _post(lib, ctx, node, srcs):
    comb = srcs[3] if len(srcs) > 3 else lib.ffi.NULL   # 0.25.3: none, the identity
    return lib.ggml_dsv4_hc_post(ctx, srcs[0], srcs[1], srcs[2], comb)
