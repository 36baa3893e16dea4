"""Replays of the normalisations (NORM, RMS_NORM, L2_NORM, GROUP_NORM); a node that is a
view of its source was built in place."""
from __future__ import annotations

from . import replay

_EPS_ONLY = {"NORM": "ggml_norm", "RMS_NORM": "ggml_rms_norm", "L2_NORM": "ggml_l2_norm"}


def _name(base, node):
    return base + "_inplace" if node.view_src is not None else base


@replay(*_EPS_ONLY)
def _eps_only(lib, ctx, node, srcs):
    return getattr(lib, _name(_EPS_ONLY[node.op], node))(ctx, srcs[0], node.param_f32(0))


@replay("GROUP_NORM")
def _group_norm(lib, ctx, node, srcs):
    return getattr(lib, _name("ggml_group_norm", node))(ctx, srcs[0], node.param_i32(0), node.param_f32(1))
