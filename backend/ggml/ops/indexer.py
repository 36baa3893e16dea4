"""Replay of LIGHTNING_INDEXER."""
from __future__ import annotations

from . import replay


@replay("LIGHTNING_INDEXER")
def _lightning_indexer(lib, ctx, node, srcs):
    return lib.ggml_lightning_indexer(ctx, srcs[0], srcs[1], srcs[2], srcs[3])
