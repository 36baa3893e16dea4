"""Replays of MUL_MAT_ID and OUT_PROD."""
from __future__ import annotations

from . import replay


@replay("MUL_MAT_ID")
def _mul_mat_id(lib, ctx, node, srcs):
    return lib.ggml_mul_mat_id(ctx, srcs[0], srcs[1], srcs[2])


@replay("OUT_PROD")
def _out_prod(lib, ctx, node, srcs):
    return lib.ggml_out_prod(ctx, srcs[0], srcs[1])
