"""test_generic_op (0.25.3): one graph node as test-export-graph-ops writes it for
test-backend-ops' --test-file (op, type, ne, op_params, sources with strides, a name), and
the reader of such files.

A line of the file: `op type ne0..ne3 n_params p... n_src (type ne0..ne3 nb0..nb3)... name`
(enum values, `-` for no name). The case builds the node as test_generic_op does: each
source a leaf, or a view of a 1-d leaf big enough for its strides; the node takes the
op_params words as they are, so every backend reads them as from ggml's own constructor.
"""
from __future__ import annotations

import numpy as np

from .catalog import Case, Family, family, register
from .graph import GGML_MAX_SRC, GLU_OPS, OPS, UNARY_OPS, contiguous_strides, new_op, view_of
from .inputs import kq_mask, shuffled_rows
from .types import TYPES, ggml_type

N_PARAMS = 16   # GGML_MAX_OP_PARAMS / sizeof(int32_t)
_BY_VALUE = {t.value: t for t in TYPES.values()}
ROPE_MROPE = 8


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


def parse_line(line: str) -> dict:
    """One line of a test-export-graph-ops file as generic_op params; ValueError says why not."""
    f = line.split()
    pos = 0

    def take(n=1):
        nonlocal pos
        if pos + n > len(f):
            raise ValueError("the line ends early")
        out = f[pos:pos + n]
        pos += n
        return out

    def type_of(v):
        t = _BY_VALUE.get(int(v))
        if t is None:
            raise ValueError(f"unknown ggml type {v}")
        return t.name

    op_value, type_value = (int(x) for x in take(2))
    if not 0 < op_value < len(OPS):
        raise ValueError(f"unknown ggml op {op_value}")
    ne = [int(x) for x in take(4)]
    n_params = int(take()[0])
    params = [int(x) for x in take(n_params)][:N_PARAMS]
    params += [0] * (N_PARAMS - len(params))
    sources = []
    for _ in range(int(take()[0])):
        st = type_of(take()[0])
        sne, snb = [int(x) for x in take(4)], [int(x) for x in take(4)]
        sources.append([st, sne, snb])
    name = take()[0] if pos < len(f) else "-"
    return dict(op=OPS[op_value], type=type_of(type_value), ne=ne, op_params=params, sources=sources,
                name="" if name == "-" else name)


def is_graph_ops_file(lines) -> bool:
    """A test-export-graph-ops file: its first line is numbers (an op's enum value first)."""
    first = next((line for line in lines if line.strip()), "")
    return first.split(maxsplit=1)[0].isdigit() if first.strip() else False


def read_graph_ops(lines, version: str) -> list[Case]:
    """The cases of a test-export-graph-ops file's lines, at catalog `version` (0.25.3 on);
    ValueError names the first line that is not one."""
    fam = family("generic_op", version)
    cases = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            cases.append(Case(fam, parse_line(line)))
        except (ValueError, IndexError) as e:
            raise ValueError(f"line {n}: not a test-export-graph-ops line: {e}") from None
    return cases
