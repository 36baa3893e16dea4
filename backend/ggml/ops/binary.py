"""Replays of the binary family's own ops (ADD/SUB/MUL/DIV are replayed in core.py)."""
from __future__ import annotations

from . import replay


@replay("ADD_ID")
def _add_id(lib, ctx, node, srcs):
    return lib.ggml_add_id(ctx, srcs[0], srcs[1], srcs[2])


@replay("ACC", "SET")
def _region(lib, ctx, node, srcs):
    # op_params: nb1, nb2, nb3, offset, inplace (ggml_acc_impl / ggml_set_impl)
    nb1, nb2, nb3, offset, inplace = node.params_i32(5)
    name = {"ACC": "ggml_acc", "SET": "ggml_set"}[node.op] + ("_inplace" if inplace else "")
    return getattr(lib, name)(ctx, srcs[0], srcs[1], nb1, nb2, nb3, offset)
