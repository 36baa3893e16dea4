"""Replay of SOFT_MAX_BACK."""
from __future__ import annotations

from . import replay


@replay("SOFT_MAX_BACK")
def _soft_max_back(lib, ctx, node, srcs):
    return lib.ggml_soft_max_ext_back(ctx, srcs[0], srcs[1], node.param_f32(0), node.param_f32(1))
