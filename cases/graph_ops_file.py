"""test_generic_op (0.25.3): one graph node as test-export-graph-ops writes it for
test-backend-ops' --test-file (op, type, ne, op_params, sources with strides, a name), and
the reader of such files.

A line of the file: `op type ne0..ne3 n_params p... n_src (type ne0..ne3 nb0..nb3)... name`
(enum values, `-` for no name). The case builds the node as test_generic_op does: each
source a leaf, or a view of a 1-d leaf big enough for its strides; the node takes the
op_params words as they are, so every backend reads them as from ggml's own constructor.
"""
from __future__ import annotations

import struct

import numpy as np

from .catalog import Case, Family, family, register
from .graph import GGML_MAX_SRC, GLU_OPS, OPS, UNARY_OPS, contiguous_strides, new_op, view_of
from .inputs import kq_mask, shuffled_rows
from .types import TYPES, ggml_type
from .untrusted import quoted

N_PARAMS = 16   # GGML_MAX_OP_PARAMS / sizeof(int32_t)
_BY_VALUE = {t.value: t for t in TYPES.values()}
ROPE_MROPE = 8
NO_SOURCES = ("ARANGE",)   # the only op ggml makes without a source


def _contiguous(src) -> bool:
    """is_non_contiguous's negation: no strides given, or ggml's own."""
    type, ne, nb = src
    return nb[0] == 0 or tuple(nb) == contiguous_strides(ggml_type(type), ne)


def _desc(p) -> str:
    """ggml_op_desc: the sub-op of UNARY and GLU nodes, else the op."""
    if p["op"] == "UNARY":
        return UNARY_OPS[p["op_params"][0]]
    if p["op"] == "GLU":
        return GLU_OPS[p["op_params"][0]]
    return p["op"]


def _vars(p) -> str:
    """test_generic_op::vars(): [name,] type, ne, the non-zero op_params as i:v, the sources
    as type[ne] (+ nb[..] when strided)."""
    params = ",".join(f"{i}:{v}" for i, v in enumerate(p["op_params"]) if v != 0)
    srcs = ",".join(f"{t}[{','.join(map(str, ne))}]" + ("" if _contiguous((t, ne, nb)) else
                                                         f"nb[{','.join(map(str, nb))}]")
                    for t, ne, nb in p["sources"])
    head = f"name={p['name']}," if p["name"] else ""
    return f"{head}type={p['type']},ne=[{','.join(map(str, p['ne']))}],op_params=[{params}],sources={srcs}"


def build_generic_op(g, op, type, ne, op_params, sources, name=""):
    srcs = []
    for i, (st, sne, snb) in enumerate(sources[:GGML_MAX_SRC]):
        t = ggml_type(st)
        if _contiguous((st, sne, snb)):
            srcs.append(g.new_tensor(t, sne, f"src{i}"))
            continue
        # the bytes the strides reach, as a 1-d leaf of whole blocks
        size = sne[0] * snb[0] // t.blck_size + sum((n - 1) * s for n, s in zip(sne[1:], snb[1:]))
        elems = -(-size * t.blck_size // t.type_size)
        elems = -(-elems // t.blck_size) * t.blck_size
        backing = g.new_tensor(t, [elems], f"src{i}")
        srcs.append(view_of(backing, "VIEW", sne, snb))
    inplace = (op in ("SET", "ACC") and op_params[4] != 0) or (op == "ADD_REL_POS" and op_params[0] != 0)
    if op == "SET_ROWS" and len(srcs) in (2, 3):
        # ggml's node is a view of the destination, which ggml 0.25.3 lists as src[2] (the
        # files of test-export-graph-ops then have 3 sources) and older ggml not at all; the
        # rows are written into a fresh tensor (zeroed, as a new buffer is) in its place
        dst = g.new_tensor(ggml_type(type), ne, "dst")
        out = view_of(dst, op, dst.ne, dst.nb)
        out.src = srcs[:2] + [dst]
    elif inplace and srcs:
        out = view_of(srcs[0], op, srcs[0].ne, srcs[0].nb)
        out.src = srcs
    else:
        out = new_op(g, op, type, ne, srcs)
    out.set_params_i32(op_params)
    out.name = "out"
    return out


def init_generic_op(t, rng, p):
    """test_generic_op::initialize_tensors: row ids in range for GET_ROWS, SET_ROWS, ROPE,
    MUL_MAT_ID / ADD_ID and SSM_SCAN, the KQ mask of FLASH_ATTN_EXT; uniform otherwise."""
    op, i = p["op"], int(t.name[3:]) if t.name.startswith("src") else -1
    srcs = p["sources"]
    if t.name == "dst":
        return np.zeros(tuple(reversed(t.ne)), t.type.dtype or np.float32)
    if op == "FLASH_ATTN_EXT" and i == 3:
        return kq_mask(t, rng)
    if not t.type.is_int:
        return None
    shape = tuple(reversed(t.ne))
    if op in ("GET_ROWS", "GET_ROWS_BACK"):
        return rng.integers(0, srcs[0][1][1], size=shape)
    if op == "SET_ROWS":
        return shuffled_rows(rng, np.arange(p["ne"][1]), t.nrows())[:, :t.ne[0]].reshape(shape)
    if op == "ROPE":
        return rng.integers(0, p["ne"][2], size=shape)
    if op in ("MUL_MAT_ID", "ADD_ID", "SSM_SCAN"):
        n = {"MUL_MAT_ID": srcs[0][1][2], "ADD_ID": srcs[1][1][1]}.get(op, t.ne[0])
        rows = np.stack([rng.permutation(np.arange(t.ne[0]) % n) for _ in range(t.nrows())])
        return rows.reshape(shape)
    return None


def _max_nmse(p) -> float:
    """test_generic_op::max_nmse_err."""
    op = p["op"]
    if op in ("MUL_MAT", "MUL_MAT_ID", "OUT_PROD", "CONV_TRANSPOSE_2D", "IM2COL", "CONV_2D", "CONV_3D",
              "SET_ROWS", "CPY"):
        return 5e-4
    if op == "SOFT_MAX":
        return 1e-6
    if op == "RWKV_WKV7":
        return 5e-3
    if op == "FLASH_ATTN_EXT":
        return 5e-4 * max(1.0, p["sources"][1][1][1] / 20000.0)
    return 1e-7


register(Family(
    name="generic_op",
    build=build_generic_op,
    vars=_vars,
    op=_desc,
    init=init_generic_op,
    max_nmse=_max_nmse,
    in_grad=False,
    since="0.25.3",
))


INT64_MAX, INT32 = (1 << 63) - 1, (-(1 << 31), (1 << 31) - 1)


def _ne_rule(p) -> str | None:
    """The shape rules ggml's constructors assert (GGML_ASSERT) for the ops a model's graph
    makes most, so that a line breaking one is refused before any work rather than failing
    every device: None where the node keeps them."""
    op, ne, srcs = p["op"], p["ne"], [s[1] for s in p["sources"]]
    if op in ("ADD", "SUB", "MUL", "DIV") and len(srcs) >= 2:   # ggml_can_repeat(b, a), a's shape
        a, b = srcs[0], srcs[1]
        if any(n == 0 or m % n for m, n in zip(a, b)):
            return f"src1 {b} does not repeat onto src0 {a}"
        if ne != a:
            return f"ne {ne} is not src0's {a}"
    if op == "MUL_MAT" and len(srcs) >= 2:                       # ggml_can_mul_mat
        a, b = srcs[0], srcs[1]
        if a[0] != b[0] or a[2] == 0 or a[3] == 0 or b[2] % a[2] or b[3] % a[3]:
            return f"src0 {a} and src1 {b} cannot be multiplied"
        if ne != [a[1], b[1], b[2], b[3]]:
            return f"ne {ne} is not [{a[1]}, {b[1]}, {b[2]}, {b[3]}]"
    if op in ("RMS_NORM", "NORM", "SCALE", "UNARY", "SOFT_MAX") and ne != srcs[0]:
        return f"ne {ne} is not src0's {srcs[0]}"
    if op in ("NORM", "RMS_NORM", "L2_NORM"):   # GGML_ASSERT(eps >= 0.0f) in the CPU kernels
        eps = struct.unpack("<f", struct.pack("<i", p["op_params"][0]))[0]
        if not eps >= 0.0:
            return f"eps (op_params[0]) = {eps}: ggml asserts eps >= 0"
    return None


def parse_line(line: str) -> dict:
    """One line of a test-export-graph-ops file as generic_op params; ValueError says which
    field is wrong and why (every number checked for range before use)."""
    f = line.split()
    pos = 0

    def ints(n, what, low, high):
        nonlocal pos
        if pos + n > len(f):
            raise ValueError(f"the line ends early, at {what}")
        out = []
        for text in f[pos:pos + n]:
            try:
                v = int(text)
            except ValueError:
                raise ValueError(f"{what}: {quoted(text, 20)} is not an integer") from None
            if not low <= v <= high:
                raise ValueError(f"{what}: {v} is out of range [{low}, {high}]")
            out.append(v)
        pos += n
        return out

    def type_of(what):
        (v,) = ints(1, what, 0, INT32[1])
        t = _BY_VALUE.get(v)
        if t is None:
            raise ValueError(f"{what}: unknown ggml type {v}")
        return t.name

    (op_value,) = ints(1, "op", 0, INT32[1])
    if not 0 < op_value < len(OPS):
        raise ValueError(f"unknown ggml op {op_value}")
    op, type = OPS[op_value], type_of("type")
    ne = ints(4, "ne", 0, INT64_MAX)
    (n_params,) = ints(1, "the op_params count", 0, N_PARAMS)
    params = ints(n_params, "op_params", *INT32) + [0] * (N_PARAMS - n_params)
    (n_src,) = ints(1, "the source count", 0 if op in NO_SOURCES else 1, GGML_MAX_SRC)
    sources = []
    for i in range(n_src):
        st = type_of(f"src{i}'s type")
        sources.append([st, ints(4, f"src{i}'s ne", 0, INT64_MAX), ints(4, f"src{i}'s nb", 0, INT64_MAX)])
    name = f[pos] if pos < len(f) else "-"
    p = dict(op=op, type=type, ne=ne, op_params=params, sources=sources, name="" if name == "-" else name)
    why = _ne_rule(p)
    if why:
        raise ValueError(f"{op}: {why}")
    return p


def is_graph_ops_file(lines) -> bool:
    """A test-export-graph-ops file: its first line is numbers (an op's enum value first)."""
    first = next((line for line in lines if line.strip()), "")
    return first.split(maxsplit=1)[0].isdigit() if first.strip() else False


def read_graph_ops(lines, version: str) -> list[Case]:
    """The cases of a test-export-graph-ops file's lines, at catalog `version` (0.25.3 on),
    each built once within the bounds of a case named from outside; ValueError names the
    first line that is not one, or whose node cannot be built."""
    from .names import MAX_NAMED_BYTES, MAX_NAMED_TENSORS
    fam = family("generic_op", version)
    cases = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            case = Case(fam, parse_line(line))
        except ValueError as e:
            raise ValueError(f"line {n}: not a test-export-graph-ops line: {e}") from None
        try:
            case.build(MAX_NAMED_BYTES, MAX_NAMED_TENSORS)
        except Exception as e:   # a bound, ggml's shape rules as the graph checks them
            raise ValueError(f"line {n}: its {case.op} node cannot be built: {type(e).__name__}: {e}") from None
        cases.append(case)
    return cases
