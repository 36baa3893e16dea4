"""Replays of SSM_SCAN, RWKV_WKV6, GATED_LINEAR_ATTN, RWKV_WKV7, GATED_DELTA_NET, SOLVE_TRI."""
from __future__ import annotations

from . import replay


@replay("SSM_SCAN")
def _ssm_scan(lib, ctx, node, srcs):
    return lib.ggml_ssm_scan(ctx, *srcs[:7], node.param_i32(0))


@replay("RWKV_WKV6")
def _rwkv_wkv6(lib, ctx, node, srcs):
    return lib.ggml_rwkv_wkv6(ctx, *srcs[:6])


@replay("GATED_LINEAR_ATTN")
def _gla(lib, ctx, node, srcs):
    return lib.ggml_gated_linear_attn(ctx, *srcs[:5], node.param_f32(0))


@replay("RWKV_WKV7")
def _rwkv_wkv7(lib, ctx, node, srcs):
    return lib.ggml_rwkv_wkv7(ctx, *srcs[:7])


@replay("GATED_DELTA_NET")
def _gated_delta_net(lib, ctx, node, srcs):
    return lib.ggml_gated_delta_net(ctx, *srcs[:6], node.param_i32(0))


@replay("SOLVE_TRI")
def _solve_tri(lib, ctx, node, srcs):
    return lib.ggml_solve_tri(ctx, srcs[0], srcs[1], True, True, False)
