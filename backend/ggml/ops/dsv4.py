"""Replays of DSV4_HC_COMB, DSV4_HC_PRE and DSV4_HC_POST."""
from __future__ import annotations

import struct

from . import params_since, replay


@replay("DSV4_HC_COMB")
def _comb(lib, ctx, node, srcs):
    return lib.ggml_dsv4_hc_comb(ctx, srcs[0], srcs[1], srcs[2], node.param_f32(0), node.param_i32(1))


@replay("DSV4_HC_PRE")
def _pre(lib, ctx, node, srcs):
    if node.param_i32(1):   # 0.25.3: gated
        return lib.ggml_dsv4_hc_pre_gated(ctx, srcs[0], srcs[1], node.param_f32(0))
    return lib.ggml_dsv4_hc_pre(ctx, srcs[0], srcs[1])


@params_since("DSV4_HC_PRE", "0.25.3")
def _pre_params(params: bytes) -> bytes:
    """ggml_dsv4_hc_pre wrote no op_params before 0.25.3; from then on it writes (scale,
    gated) = (1.0f, 0), and the CPU kernel multiplies the sum by that scale: all zeros is
    the older encoding of the same weighted sum (0.25.3's gated form has gated = 1)."""
    return struct.pack("<f", 1.0) + params[4:] if not any(params) else params


@replay("DSV4_HC_POST")
def _post(lib, ctx, node, srcs):
    comb = srcs[3] if len(srcs) > 3 else lib.ffi.NULL   # 0.25.3: none, the identity
    return lib.ggml_dsv4_hc_post(ctx, srcs[0], srcs[1], srcs[2], comb)
