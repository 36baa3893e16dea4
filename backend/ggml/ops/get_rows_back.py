"""Replay of GET_ROWS_BACK (cases/get_rows_back.py)."""
from __future__ import annotations

from . import replay


@replay("GET_ROWS_BACK")
def _get_rows_back(lib, ctx, node, srcs):
    # the forward input is no src of the node, only the source of its shape: a stand-in of
    # that shape serves the constructor
    shape = lib.ggml_new_tensor_2d(ctx, lib.GGML_TYPE_F32, node.ne[0], node.ne[1])
    return lib.ggml_get_rows_back(ctx, srcs[0], srcs[1], shape)
