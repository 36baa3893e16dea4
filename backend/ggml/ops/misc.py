"""Replays of SSM_CONV and TIMESTEP_EMBEDDING."""
from __future__ import annotations

from . import replay


@replay("SSM_CONV")
def _ssm_conv(lib, ctx, node, srcs):
    return lib.ggml_ssm_conv(ctx, srcs[0], srcs[1])


@replay("TIMESTEP_EMBEDDING")
def _timestep_embedding(lib, ctx, node, srcs):
    return lib.ggml_timestep_embedding(ctx, srcs[0], node.param_i32(0), node.param_i32(1))
