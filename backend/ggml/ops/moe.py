"""Replay of OUT_PROD (MUL_MAT_ID's is beside MUL_MAT's, matmul.py)."""
from __future__ import annotations

from . import replay


@replay("OUT_PROD")
def _out_prod(lib, ctx, node, srcs):
    return lib.ggml_out_prod(ctx, srcs[0], srcs[1])
