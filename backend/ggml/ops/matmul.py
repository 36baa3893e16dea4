"""Replay of MUL_MAT (with its hint, op_params word 1, where a case sets one)."""
from __future__ import annotations

from . import replay


@replay("MUL_MAT")
def _mul_mat(lib, ctx, node, srcs):
    t = lib.ggml_mul_mat(ctx, srcs[0], srcs[1])
    if node.param_i32(1):
        lib.ggml_mul_mat_set_hint(t, node.param_i32(1))   # e.g. MUL_MAT_HADAMARD's
    return t
