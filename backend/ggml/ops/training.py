"""Replays of CROSS_ENTROPY_LOSS(_BACK), OPT_STEP_ADAMW, OPT_STEP_SGD, SILU_BACK, RMS_NORM_BACK."""
from __future__ import annotations

from cannops.cases.graph import FLAG_PARAM

from . import replay


@replay("CROSS_ENTROPY_LOSS")
def _cross_entropy_loss(lib, ctx, node, srcs):
    return lib.ggml_cross_entropy_loss(ctx, srcs[0], srcs[1])


@replay("CROSS_ENTROPY_LOSS_BACK")
def _cross_entropy_loss_back(lib, ctx, node, srcs):
    return lib.ggml_cross_entropy_loss_back(ctx, srcs[0], srcs[1], srcs[2])


def _mark_param(lib, node, p) -> None:
    """ggml's optimizer steps insist on a parameter (ggml_set_param), as the case marks it."""
    if node.src[0].flags & FLAG_PARAM:
        lib.ggml_set_param(p)


@replay("OPT_STEP_ADAMW")
def _adamw(lib, ctx, node, srcs):
    _mark_param(lib, node, srcs[0])
    return lib.ggml_opt_step_adamw(ctx, *srcs[:5])


@replay("OPT_STEP_SGD")
def _sgd(lib, ctx, node, srcs):
    _mark_param(lib, node, srcs[0])
    return lib.ggml_opt_step_sgd(ctx, *srcs[:3])


@replay("SILU_BACK")
def _silu_back(lib, ctx, node, srcs):
    return lib.ggml_silu_back(ctx, srcs[0], srcs[1])


@replay("RMS_NORM_BACK")
def _rms_norm_back(lib, ctx, node, srcs):
    return lib.ggml_rms_norm_back(ctx, srcs[0], srcs[1], node.param_f32(0))
