"""Replays of MUL_MAT (with its hint, op_params word 1, where a case sets one) and
MUL_MAT_ID, each with src[1]'s precision (op_params word 3, ggml 0.25.3 on) where set."""
from __future__ import annotations

from ..library import TooOld
from . import replay


def with_prec(lib, t, node):
    """ggml_prec_set_src(t, prec, 1) where the node carries a precision for src[1]."""
    prec = node.param_i32(3)
    if prec:
        if not hasattr(lib, "ggml_prec_set_src"):
            raise TooOld("this ggml has no ggml_prec_set_src (0.25.3 on)")
        lib.ggml_prec_set_src(t, prec, 1)
    return t


@replay("MUL_MAT")
def _mul_mat(lib, ctx, node, srcs):
    t = lib.ggml_mul_mat(ctx, srcs[0], srcs[1])
    if node.param_i32(1):
        lib.ggml_mul_mat_set_hint(t, node.param_i32(1))   # e.g. MUL_MAT_HADAMARD's
    return with_prec(lib, t, node)


@replay("MUL_MAT_ID")
def _mul_mat_id(lib, ctx, node, srcs):
    return with_prec(lib, lib.ggml_mul_mat_id(ctx, srcs[0], srcs[1], srcs[2]), node)
