"""Replays: how each op node of a case graph is rebuilt with libggml's OWN constructor.

    @replay("ADD")                        # key: op name, or "UNARY:SILU" / "GLU:SWIGLU"
    def _add(lib, ctx, node, srcs):       # srcs: ggml tensors of node.src (NULL for None)
        return lib.ggml_add(ctx, srcs[0], srcs[1])

`lib` is the cffi lib of cannops.native._ggml, with every constructor guarded: a failed
GGML_ASSERT inside ggml raises DeviceError instead of aborting the process. `lib.ffi`
is the module's ffi (to build arrays: lib.ffi.new("int32_t[4]", ...)). Read op
parameters from the node (node.param_i32(i), node.param_f32(i), node.ne, ...), call
the constructor as test-backend-ops would, return the tensor; the device then checks
that its type, ne, nb, op, op_params, src and view offset equal the node's.

A node created as a by-product of a later node's constructor (ggml_top_k builds its
own argsort, for instance) returns DEFER; it is bound, and checked, when the later node
is replayed, by walking that node's src / view_src links. The later node's srcs hold
NULL for it; `built(t)` gives the ggml tensor of any node replayed so far (e.g. the
source of the deferred node: built(node.src[0].src[0])).

A case graph of one catalog version may be replayed on the ggml of another (the test suite
runs v0.20.2's cases on any bridge). Where a constructor's op_params changed encoding
between versions for the same op, `@params_since(op, version)` declares the change: the
check then compares the node's and ggml's op_params each in the newer encoding.

Every module of this package is imported on first use: add a <family>.py beside core.py.
"""
from __future__ import annotations

from typing import Callable

from cannops.cases.plugins import load_plugins

REPLAYS: dict[str, Callable] = {}
DEFER = object()
_current: list = []  # ggml tensors by node index, of the graph being replayed


def built(node):
    """The ggml tensor already built for a node of the graph being replayed (or None)."""
    return _current[node.index]


def replay(*keys: str):
    def deco(fn):
        for k in keys:
            assert k not in REPLAYS, f"duplicate replay for {k}"
            REPLAYS[k] = fn
        return fn
    return deco


# op -> (the ggml version whose constructor writes the newer encoding, the older
# encoding's op_params -> the newer's; the newer's unchanged)
PARAMS_SINCE: dict[str, tuple[str, Callable[[bytes], bytes]]] = {}


def params_since(op: str, version: str):
    def deco(fn):
        PARAMS_SINCE[op] = (version, fn)
        return fn
    return deco


def same_params(op: str, ggml_params: bytes, node_params: bytes) -> bool:
    """Whether ggml's op_params and the node's encode the same op: equal, or equal once
    both are in the newer encoding (a declared params_since change)."""
    if ggml_params == node_params:
        return True
    change = PARAMS_SINCE.get(op)
    return change is not None and change[1](ggml_params) == change[1](bytes(node_params))


def find_replay(node) -> Callable | None:
    """The replay of a node: by its op_key ("UNARY:SILU") first, then by op ("UNARY")."""
    return REPLAYS.get(node.op_key) or REPLAYS.get(node.op)


def load_all() -> None:
    load_plugins(__name__)
