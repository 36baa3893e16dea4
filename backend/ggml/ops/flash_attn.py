"""Replay of FLASH_ATTN_EXT: ggml_flash_attn_ext, then ggml_flash_attn_ext_add_sinks,
ggml_flash_attn_ext_set_n_kv_max (0.25.3) and ggml_flash_attn_ext_set_prec, in
test-backend-ops' order."""
from __future__ import annotations

from ..library import TooOld
from . import replay


@replay("FLASH_ATTN_EXT")
def _flash_attn_ext(lib, ctx, node, srcs):
    ffi = lib.ffi
    # srcs[3] (the mask) is NULL when absent
    out = lib.ggml_flash_attn_ext(ctx, srcs[0], srcs[1], srcs[2], srcs[3], node.param_f32(0),
                                  node.param_f32(1), node.param_f32(2))
    if out != ffi.NULL:
        lib.ggml_flash_attn_ext_add_sinks(out, srcs[4] if len(srcs) > 4 else ffi.NULL)
        if node.param_i32(4):
            if not hasattr(lib, "ggml_flash_attn_ext_set_n_kv_max"):
                raise TooOld("this ggml has no ggml_flash_attn_ext_set_n_kv_max (0.25.3 on)")
            lib.ggml_flash_attn_ext_set_n_kv_max(out, node.param_i32(4))
        lib.ggml_flash_attn_ext_set_prec(out, node.param_i32(3))
    return out
