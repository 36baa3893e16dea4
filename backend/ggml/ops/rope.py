"""Replays of ROPE and ROPE_BACK: ggml_rope_ext / ggml_rope_multi (M-RoPE modes, with their
sections), their _inplace forms (the node is a view of its source) and _back forms."""
from __future__ import annotations

from ..library import TooOld
from . import replay

MROPE = 8


@replay("ROPE", "ROPE_BACK")
def _rope(lib, ctx, node, srcs):
    a, pos, freq = (srcs + [lib.ffi.NULL] * 3)[:3]
    n_dims, mode, n_ctx_orig = node.param_i32(1), node.param_i32(2), node.param_i32(4)
    floats = node.params_f32(6, 5)  # base, scale, ext, attn, beta_fast, beta_slow
    multi = mode & MROPE
    name = "ggml_rope_multi" if multi else "ggml_rope_ext"
    if node.op == "ROPE_BACK":
        name += "_back"
    elif node.view_src is not None:
        name += "_inplace"
    head = [ctx, a, pos, freq, n_dims]
    if multi:
        head.append(lib.ffi.new("int[4]", [node.param_i32(11 + i) for i in range(4)]))
    out = getattr(lib, name)(*head, mode, n_ctx_orig, *floats)
    if node.param_i32(15):   # ggml 0.25.3 on: the rotated window at an offset
        if not hasattr(lib, "ggml_rope_set_offset"):
            raise TooOld("this ggml has no ggml_rope_set_offset (0.25.3 on)")
        out = lib.ggml_rope_set_offset(out, node.param_i32(15))
    return out
