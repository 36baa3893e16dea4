"""Replay of MUL_MAT."""
from __future__ import annotations

from . import replay


@replay("MUL_MAT")
def _mul_mat(lib, ctx, node, srcs):
    return lib.ggml_mul_mat(ctx, srcs[0], srcs[1])
