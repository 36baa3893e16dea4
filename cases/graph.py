"""ggml's tensor model in Python: the graph a case is made of.

A `Graph` plays the part of a ggml context: tensors are created in order, leaves with
`new_tensor`, op nodes with constructor functions that compute `ne`, `nb` and
`op_params` exactly as ggml's constructors (ggml.c) do. Backends read the result:

* the NumPy reference interprets each node,
* the ggml backend replays each node through libggml's own constructor,
* the CANN backend hands each node to the native aclnn layer as a `ggml_tensor`.

Op and sub-op names are ggml's enum names without their prefix ("ADD", "UNARY" + "SILU").
Their position in the lists below is their enum value in ggml v0.20.2 (ggml.h).
"""
from __future__ import annotations

import math
import struct
from typing import Iterable, Sequence

from .types import GGMLType, ggml_type

GGML_MAX_DIMS = 4
GGML_MAX_SRC = 10
GGML_MAX_OP_PARAMS = 64  # bytes

OPS = """NONE DUP ADD ADD_ID ADD1 ACC SUB MUL DIV SQR SQRT LOG SIN COS SUM SUM_ROWS CUMSUM MEAN
ARGMAX COUNT_EQUAL REPEAT REPEAT_BACK CONCAT SILU_BACK NORM RMS_NORM RMS_NORM_BACK GROUP_NORM
L2_NORM MUL_MAT MUL_MAT_ID OUT_PROD SCALE SET CPY CONT RESHAPE VIEW PERMUTE TRANSPOSE GET_ROWS
GET_ROWS_BACK SET_ROWS DIAG DIAG_MASK_INF DIAG_MASK_ZERO SOFT_MAX SOFT_MAX_BACK ROPE ROPE_BACK
CLAMP CONV_TRANSPOSE_1D IM2COL IM2COL_BACK IM2COL_3D COL2IM_1D CONV_2D CONV_3D CONV_2D_DW
CONV_TRANSPOSE_2D POOL_1D POOL_2D POOL_2D_BACK UPSCALE PAD PAD_REFLECT_1D ROLL ARANGE
TIMESTEP_EMBEDDING ARGSORT TOP_K LEAKY_RELU TRI FILL FLASH_ATTN_EXT FLASH_ATTN_BACK SSM_CONV
SSM_SCAN WIN_PART WIN_UNPART GET_REL_POS ADD_REL_POS RWKV_WKV6 GATED_LINEAR_ATTN RWKV_WKV7
SOLVE_TRI GATED_DELTA_NET LIGHTNING_INDEXER DSV4_HC_COMB DSV4_HC_PRE DSV4_HC_POST UNARY
MAP_CUSTOM1 MAP_CUSTOM2 MAP_CUSTOM3 CUSTOM CROSS_ENTROPY_LOSS CROSS_ENTROPY_LOSS_BACK
OPT_STEP_ADAMW OPT_STEP_SGD GLU""".split()

UNARY_OPS = """ABS SGN NEG STEP TANH ELU RELU SIGMOID GELU GELU_QUICK SILU HARDSWISH HARDSIGMOID
EXP EXPM1 SOFTPLUS GELU_ERF XIELU FLOOR CEIL ROUND TRUNC""".split()

GLU_OPS = "REGLU GEGLU SWIGLU SWIGLU_OAI GEGLU_ERF GEGLU_QUICK SWIGLU_CLAMP".split()   # SWIGLU_CLAMP: 0.25.3

OP_VALUE = {name: i for i, name in enumerate(OPS)}
VIEW_OPS = frozenset({"VIEW", "RESHAPE", "PERMUTE", "TRANSPOSE"})
SUBOP_OPS = ("UNARY", "GLU")   # ops whose op_params[0] names a sub-op (ggml_op_desc)

# tensor flags (ggml.h)
FLAG_INPUT, FLAG_OUTPUT, FLAG_PARAM, FLAG_LOSS = 1, 2, 4, 8


class Tensor:
    """One ggml_tensor: a leaf (op NONE), a view of another tensor, or an op node."""

    __slots__ = ("graph", "index", "type", "ne", "nb", "op", "op_params", "src",
                 "view_src", "view_offs", "name", "flags")
    view_src: Tensor | None
    view_offs: int
    nb: tuple[int, ...]

    def __init__(self, graph: "Graph", type: GGMLType, ne: Sequence[int],
                 view_src: "Tensor | None" = None, view_offs: int = 0):
        ne = tuple(map(int, ne))
        if len(ne) < GGML_MAX_DIMS:
            ne += (1,) * (GGML_MAX_DIMS - len(ne))
        if view_src is None:
            check_shape(type, ne)
            if graph.max_bytes is not None:
                graph.owned_bytes += math.prod(ne) // type.blck_size * type.type_size
                if graph.owned_bytes > graph.max_bytes:
                    raise TooLarge(f"its tensors take {graph.owned_bytes / 2**30:,.0f} GiB, more than the "
                                   f"{graph.max_bytes / 2**30:,.0f} GiB a case named from outside may take")
        if graph.max_tensors is not None and len(graph.tensors) >= graph.max_tensors:
            raise TooLarge(f"it makes more than the {graph.max_tensors:,} tensors a case named from "
                           f"outside may make")
        if view_src is not None and view_src.view_src is not None:
            view_offs += view_src.view_offs
            view_src = view_src.view_src
        self.graph = graph
        self.index = len(graph.tensors)
        self.type = type
        self.ne = ne
        self.nb = contiguous_strides(type, ne)
        self.op = "NONE"
        self.op_params = bytearray(GGML_MAX_OP_PARAMS)
        # an optional source ggml leaves NULL is None here; typed as a Tensor, since the readers
        # index the sources their op always has (the few that set a None ignore the type)
        self.src: list[Tensor] = []
        self.view_src = view_src
        self.view_offs = view_offs
        self.name = ""
        self.flags = 0
        graph.tensors.append(self)

    # --- shape helpers (ggml.h names) ---
    def nelements(self) -> int:
        return math.prod(self.ne)

    def nrows(self) -> int:
        return self.ne[1] * self.ne[2] * self.ne[3]

    def nbytes(self) -> int:
        """Bytes spanned by the tensor, as ggml_nbytes."""
        if any(n <= 0 for n in self.ne):
            return 0
        t = self.type
        if t.blck_size == 1:
            size = t.type_size
            for i in range(GGML_MAX_DIMS):
                size += (self.ne[i] - 1) * self.nb[i]
            return size
        size = self.ne[0] * self.nb[0] // t.blck_size
        for i in range(1, GGML_MAX_DIMS):
            size += (self.ne[i] - 1) * self.nb[i]
        return size

    def is_contiguous(self) -> bool:
        return self.nb == contiguous_strides(self.type, self.ne)

    def is_view(self) -> bool:
        return self.op in VIEW_OPS

    def is_leaf(self) -> bool:
        return self.op == "NONE"

    @property
    def base(self) -> "Tensor":
        """The tensor that owns the memory (itself unless a view)."""
        return self.view_src if self.view_src is not None else self

    # --- op_params, packed as ggml packs them (int32 words, floats by bit pattern) ---
    def set_params_i32(self, values: Iterable[int], start: int = 0) -> None:
        for i, v in enumerate(values):
            struct.pack_into("<i", self.op_params, 4 * (start + i), int(v))

    def set_params_f32(self, values: Iterable[float], start: int = 0) -> None:
        for i, v in enumerate(values):
            struct.pack_into("<f", self.op_params, 4 * (start + i), float(v))

    def param_i32(self, i: int) -> int:
        return struct.unpack_from("<i", self.op_params, 4 * i)[0]

    def param_f32(self, i: int) -> float:
        return struct.unpack_from("<f", self.op_params, 4 * i)[0]

    def params_i32(self, n: int, start: int = 0) -> tuple[int, ...]:
        """op_params words start .. start+n-1 as int32: a constructor's int arguments in order."""
        return struct.unpack_from(f"<{n}i", self.op_params, 4 * start)

    def params_f32(self, n: int, start: int = 0) -> tuple[float, ...]:
        return struct.unpack_from(f"<{n}f", self.op_params, 4 * start)

    def param_u64(self, i: int) -> int:
        return struct.unpack_from("<Q", self.op_params, 4 * i)[0]

    @property
    def op_desc(self) -> str:
        """ggml_op_desc(): the unary / glu sub-op name for UNARY and GLU nodes."""
        if self.op == "UNARY":
            return UNARY_OPS[self.param_i32(0)]
        if self.op == "GLU":
            return GLU_OPS[self.param_i32(0)]
        return self.op

    @property
    def op_key(self) -> str:
        """The key every op registry uses (reference, ggml replay, CANN rule and handler):
        "UNARY:SILU" / "GLU:SWIGLU" for the sub-op nodes, the op name for the others.
        native/aclnn/dispatch.c's subop_of() is its C mirror."""
        return f"{self.op}:{self.op_desc}" if self.op in SUBOP_OPS else self.op

    def __repr__(self) -> str:
        return f"Tensor#{self.index}({self.name or '?'}: {self.op_desc} {self.type.name} ne={list(self.ne)})"


def check_shape(type: GGMLType, ne: Sequence[int]) -> None:
    """What ggml_new_tensor takes: no negative dim, and rows of whole blocks of a block
    type (ggml_row_size asserts it): the domain of every family, for `ops fuzz` and for the
    case names `ops test -o` builds off the grid. A ValueError says which rule is broken."""
    if min(ne) < 0:
        raise ValueError(f"negative dim in ne={list(ne)}")
    if ne[0] % type.blck_size:
        raise ValueError(f"a {type.name} row holds whole blocks of {type.blck_size}: "
                         f"ne[0] = {ne[0]} is not a multiple")


def contiguous_strides(type: GGMLType, ne: Sequence[int]) -> tuple[int, int, int, int]:
    nb0 = type.type_size
    nb1 = nb0 * (ne[0] // type.blck_size)
    nb2 = nb1 * ne[1]
    nb3 = nb2 * ne[2]
    return (nb0, nb1, nb2, nb3)


class TooLarge(ValueError):
    """A graph past its bound: a case named from outside asks for more than a run may take."""


class Graph:
    """A ggml context plus the output node: every tensor of one case, in creation order."""

    def __init__(self, version: str = "", max_bytes: int | None = None, max_tensors: int | None = None):
        # the catalog version whose ggml the graph models (constructors that changed read
        # it, e.g. ggml_clamp); "": the one in use
        self.version = version
        # bounds of a graph built from a name from outside, checked as each tensor is made
        # (so that a count of 10^23 in a name stops at the bound, not at the machine's end)
        self.max_bytes, self.max_tensors, self.owned_bytes = max_bytes, max_tensors, 0
        self.tensors: list[Tensor] = []
        self.out: Tensor | None = None
        # Fused test-mode cases are checked on these nodes only (test-backend-ops'
        # run_whole_graph); None means every op node.
        self.check_nodes: list[Tensor] | None = None

    def ggml_at_least(self, version: str) -> bool:
        """Whether the ggml modelled is `version` or later."""
        from .versions import at_or_after, current
        return at_or_after(self.version or current(), version)

    def params(self) -> list[Tensor]:
        """Leaves marked with set_param: the tensors `ops grad` differentiates."""
        return [t for t in self.tensors if t.flags & FLAG_PARAM]

    @property
    def leaves(self) -> list[Tensor]:
        return [t for t in self.tensors if t.op == "NONE"]

    def nodes(self) -> list[Tensor]:
        """Op nodes (views included) reachable from `out` (and the check nodes), in creation
        (= topological) order."""
        seen: set[int] = set()
        stack = [self.out, *(self.check_nodes or ())]
        while stack:
            t = stack.pop()
            if t.index in seen:
                continue
            seen.add(t.index)
            stack.extend(s for s in t.src if s is not None)  # None: an absent optional src
            if t.view_src is not None:
                stack.append(t.view_src)
        return [t for t in self.tensors if t.index in seen and t.op != "NONE"]

    # --- leaves ---
    def new_tensor(self, type, ne: Sequence[int], name: str = "") -> Tensor:
        t = Tensor(self, ggml_type(type), ne)
        t.name = name
        return t


def new_op(g: Graph, op: str, type, ne: Sequence[int], srcs: Sequence[Tensor | None],
           i32: Sequence[int] = (), f32: Sequence[float] = (), f32_start: int | None = None) -> Tensor:
    """A new contiguous op node (ggml_new_tensor + op, op_params and src)."""
    t = Tensor(g, ggml_type(type), ne)
    t.op = op
    t.src = list(srcs)   # type: ignore[arg-type]   # None: a NULL source (Tensor.src)
    t.set_params_i32(i32)
    if f32:
        t.set_params_f32(f32, len(i32) if f32_start is None else f32_start)
    return t


def view_of(a: Tensor, op: str, ne: Sequence[int], nb: Sequence[int], offset: int = 0) -> Tensor:
    """A view node of `a` (ggml_view_impl / ggml_view_tensor)."""
    t = Tensor(a.graph, a.type, ne, view_src=a, view_offs=offset)
    t.nb = tuple(nb)
    t.op = op
    t.src = [a]
    return t


def strided_view(a: Tensor, ne: Sequence[int], name: str = "", offset: int = 0) -> Tensor:
    """ggml_view_Nd(a, ne..., a->nb[1], .., a->nb[N-1], offset) for N = len(ne): a part of
    `a` that keeps its strides (the non-contiguous inputs of test-backend-ops' `v` cases)."""
    t = view(a, ne, a.nb[1:len(ne)], offset)
    t.name = name
    return t


def leaf_or_view(g: Graph, type, ne: Sequence[int], name: str, grow: Sequence[int] | None = None,
                 param: bool = False) -> Tensor:
    """The leaf `name`, or with `grow` (a factor per dim) a strided view of ne into a leaf
    that many times larger, named view_of_<name>; with `param` the leaf is a gradient
    parameter."""
    if grow is None:
        leaf = g.new_tensor(type, ne, name)
        return set_param(leaf) if param else leaf
    big = g.new_tensor(type, [n * k for n, k in zip(ne, grow)], name)
    if param:
        set_param(big)
    return strided_view(big, ne, f"view_of_{name}")


def set_param(t: Tensor) -> Tensor:
    """ggml_set_param: a leaf that `ops grad` differentiates the output by."""
    assert t.op == "NONE", "ggml_set_param: only leaves are parameters"
    t.flags |= FLAG_PARAM
    return t


# --- views, reshapes, permutes (ggml.c) ---

def view(a: Tensor, ne: Sequence[int], nb: Sequence[int] | None = None, offset: int = 0) -> Tensor:
    """ggml_view_{1,2,3,4}d: `nb` gives nb1.. (nb0 is the type size); missing ones are derived."""
    ne = list(ne)
    nbs = [a.type.type_size] + list(nb or [])
    for i in range(len(nbs), GGML_MAX_DIMS):
        prev_ne = ne[i - 1] if i - 1 < len(ne) else 1
        nbs.append(nbs[i - 1] * (prev_ne // (a.type.blck_size if i == 1 else 1)))
    ne += [1] * (GGML_MAX_DIMS - len(ne))
    t = view_of(a, "VIEW", ne, nbs, offset)
    struct.pack_into("<Q", t.op_params, 0, offset)
    return t


def reshape(a: Tensor, ne: Sequence[int]) -> Tensor:
    assert a.is_contiguous(), "ggml_reshape needs a contiguous tensor"
    assert math.prod(ne) == a.nelements()
    ne = list(ne) + [1] * (GGML_MAX_DIMS - len(ne))
    return view_of(a, "RESHAPE", ne, contiguous_strides(a.type, ne))


def permute(a: Tensor, ax0: int, ax1: int, ax2: int, ax3: int) -> Tensor:
    axes = (ax0, ax1, ax2, ax3)
    assert sorted(axes) == [0, 1, 2, 3]
    if a.type.blck_size > 1 and ax0 != 0:
        # a block spans elements of dim 0: moved elsewhere, no stride addresses an element
        raise ValueError(f"a permute of {a.type.name} must keep dim 0 (its blocks) in place")
    ne = [0] * 4
    nb = [0] * 4
    for i, ax in enumerate(axes):
        ne[ax] = a.ne[i]
        nb[ax] = a.nb[i]
    t = view_of(a, "PERMUTE", ne, nb)
    t.set_params_i32(axes)
    return t


def transpose(a: Tensor) -> Tensor:
    ne = (a.ne[1], a.ne[0], a.ne[2], a.ne[3])
    nb = (a.nb[1], a.nb[0], a.nb[2], a.nb[3])
    return view_of(a, "TRANSPOSE", ne, nb)


# --- copies ---

def cont(a: Tensor, ne: Sequence[int] | None = None) -> Tensor:
    return new_op(a.graph, "CONT", a.type, ne or a.ne, [a])


def dup(a: Tensor) -> Tensor:
    return new_op(a.graph, "DUP", a.type, a.ne, [a])


def cpy(a: Tensor, b: Tensor) -> Tensor:
    """ggml_cpy: copy (and convert) a into b; the result is a view of b."""
    assert a.nelements() == b.nelements()
    t = view_of(b, "CPY", b.ne, b.nb)
    t.src = [a, b]
    return t


def cast(a: Tensor, type) -> Tensor:
    b = a.graph.new_tensor(type, a.ne)
    return cpy(a, b)


# --- element-wise families shared by many cases ---

def unary(a: Tensor, op: str) -> Tensor:
    return new_op(a.graph, "UNARY", a.type, a.ne, [a], i32=[UNARY_OPS.index(op)])


def can_repeat(b: Tensor, a: Tensor) -> bool:
    """ggml_can_repeat(b, a): b broadcasts onto a."""
    return all(b.ne[i] != 0 and a.ne[i] % b.ne[i] == 0 for i in range(GGML_MAX_DIMS))


def binary(op: str, a: Tensor, b: Tensor) -> Tensor:
    """ADD / SUB / MUL / DIV with b broadcast onto a (ggml_add_impl and friends)."""
    assert can_repeat(b, a), f"{op}: {b.ne} does not broadcast onto {a.ne}"
    return new_op(a.graph, op, a.type, a.ne, [a, b])


def add(a, b):
    return binary("ADD", a, b)


def sub(a, b):
    return binary("SUB", a, b)


def mul(a, b):
    return binary("MUL", a, b)


def div(a, b):
    return binary("DIV", a, b)


def scale(a: Tensor, s: float, b: float = 0.0) -> Tensor:
    """ggml_scale_ext: a*s + b."""
    return new_op(a.graph, "SCALE", a.type, a.ne, [a], f32=[s, b])
