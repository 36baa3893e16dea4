"""Replays of the reduce family: row reductions, scans and sorts."""
from __future__ import annotations

from . import replay

_ONE_SRC = {"SUM": "ggml_sum", "SUM_ROWS": "ggml_sum_rows", "MEAN": "ggml_mean",
            "ARGMAX": "ggml_argmax", "CUMSUM": "ggml_cumsum"}


@replay(*_ONE_SRC)
def _one_src(lib, ctx, node, srcs):
    return getattr(lib, _ONE_SRC[node.op])(ctx, srcs[0])


@replay("COUNT_EQUAL")
def _count_equal(lib, ctx, node, srcs):
    return lib.ggml_count_equal(ctx, srcs[0], srcs[1])


@replay("ARGSORT")
def _argsort(lib, ctx, node, srcs):
    return lib.ggml_argsort(ctx, srcs[0], node.param_i32(0))  # enum ggml_sort_order
