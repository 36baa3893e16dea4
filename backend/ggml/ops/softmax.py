"""Replay of SOFT_MAX: ggml_soft_max_ext(_inplace), then ggml_soft_max_add_sinks."""
from __future__ import annotations

from . import replay


@replay("SOFT_MAX")
def _soft_max(lib, ctx, node, srcs):
    mask = srcs[1] if len(srcs) > 1 else lib.ffi.NULL
    fn = lib.ggml_soft_max_ext_inplace if node.view_src is not None else lib.ggml_soft_max_ext
    out = fn(ctx, srcs[0], mask, node.param_f32(0), node.param_f32(1))
    if len(srcs) > 2 and out != lib.ffi.NULL:
        lib.ggml_soft_max_add_sinks(out, srcs[2])
    return out
