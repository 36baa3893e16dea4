"""Replay of SET_ROWS (node.src = [b, c, a]: rows, row ids, destination)."""
from __future__ import annotations

from . import replay


@replay("SET_ROWS")
def _set_rows(lib, ctx, node, srcs):
    return lib.ggml_set_rows(ctx, srcs[2], srcs[0], srcs[1])
