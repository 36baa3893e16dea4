"""Replay of TOP_K (TOPK_MOE's ggml_argsort_top_k is an ARGSORT and a VIEW, replayed as such)."""
from __future__ import annotations

from . import replay


@replay("TOP_K")
def _top_k(lib, ctx, node, srcs):
    return lib.ggml_top_k(ctx, srcs[0], node.ne[0])
