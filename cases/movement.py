"""Data-movement ops: REPEAT, REPEAT_BACK, CONCAT, DUP, CONT, CPY, GET_ROWS, PAD,
PAD_REFLECT_1D, ROLL, ARANGE, FILL, TRI, DIAG, DIAG_MASK_INF.

One Family per test-backend-ops struct (test_repeat, test_cpy, ...). The constructors below
compute shapes and op_params as ggml.c's do; VIEW/PERMUTE/CONT/DUP/CPY come from graph.py.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from .catalog import Deviation, EVERY_DEVICE, Family, fd_limit, fmt_vars, new_params, register, Since, Tolerance
from .tolerances import QUANTIZED_DST
from .graph import (GGML_MAX_DIMS, Tensor, can_repeat, cont, cpy, dup, leaf_or_view, new_op, permute,
                    set_param, strided_view, transpose, view)
from .inputs import shape_of, uniform_init
from .types import F32, I32, ggml_type
from .implementations import ACLNN, GGML_CPU

# test-backend-ops' all_types: every type a copy / row gather is tried with
# 0.25.3 adds tq1_0 to all_types
NEW_TYPES = ("tq1_0",)
ALL_TYPES = ("f32 f16 bf16 q4_0 q4_1 q5_0 q5_1 q8_0 q1_0 q2_0 mxfp4 nvfp4 q2_K q3_K q4_K "
             "q5_K q6_K tq2_0 iq2_xxs iq2_xs iq2_s iq3_xxs iq1_s iq1_m iq4_nl iq3_s iq4_xs").split()

# enum ggml_tri_type
TRI_UPPER_DIAG, TRI_UPPER, TRI_LOWER_DIAG, TRI_LOWER = range(4)


# --- constructors (ggml.c) ---

def repeat(a: Tensor, ne) -> Tensor:
    """ggml_repeat(a, b) with b's shape `ne`: b itself is not a source."""
    ne = tuple(ne)
    assert all(n % m == 0 for n, m in zip(ne, a.ne))
    return new_op(a.graph, "REPEAT", a.type, ne, [a])


def repeat_back(a: Tensor, ne) -> Tensor:
    """ggml_repeat_back(a, b): sums the tiles of a into b's shape `ne`."""
    ne = tuple(ne)
    assert all(n % m == 0 for n, m in zip(a.ne, ne))
    return new_op(a.graph, "REPEAT_BACK", a.type, ne, [a])


def concat(a: Tensor, b: Tensor, dim: int) -> Tensor:
    assert a.type == b.type and 0 <= dim < GGML_MAX_DIMS
    assert all(a.ne[d] == b.ne[d] for d in range(GGML_MAX_DIMS) if d != dim)
    ne = [a.ne[d] + b.ne[d] if d == dim else a.ne[d] for d in range(GGML_MAX_DIMS)]
    return new_op(a.graph, "CONCAT", a.type, ne, [a, b], i32=[dim])


def get_rows(a: Tensor, b: Tensor) -> Tensor:
    """Rows b (i32 [r, ne2, ne3]) of a; the result is f32 (i32 when a is i32)."""
    assert a.ne[2] == b.ne[1] and a.ne[3] == b.ne[2] and b.ne[3] == 1 and b.type == I32
    type = I32 if a.type == I32 else F32
    return new_op(a.graph, "GET_ROWS", type, (a.ne[0], b.ne[0], b.ne[1], b.ne[2]), [a, b])


def pad_ext(a: Tensor, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3, circular=False) -> Tensor:
    """ggml_pad_ext / ggml_pad_ext_circular; ggml_pad(a, p0..p3) is pad_ext(a, 0, p0, 0, p1, ...)."""
    lp, rp = (lp0, lp1, lp2, lp3), (rp0, rp1, rp2, rp3)
    ne = [a.ne[i] + lp[i] + rp[i] for i in range(GGML_MAX_DIMS)]
    return new_op(a.graph, "PAD", a.type, ne, [a],
                  i32=[lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3, int(circular)])


def pad_reflect_1d(a: Tensor, p0: int, p1: int) -> Tensor:
    assert 0 <= p0 < a.ne[0] and 0 <= p1 < a.ne[0] and a.is_contiguous() and a.type == F32
    return new_op(a.graph, "PAD_REFLECT_1D", a.type, (a.ne[0] + p0 + p1,) + a.ne[1:], [a],
                  i32=[p0, p1])


def roll(a: Tensor, s0: int, s1: int, s2: int, s3: int) -> Tensor:
    assert a.nb[0] == a.type.type_size
    assert all(abs(s) < n for s, n in zip((s0, s1, s2, s3), a.ne))
    return new_op(a.graph, "ROLL", a.type, a.ne, [a], i32=[s0, s1, s2, s3])


def arange(g, start: float, stop: float, step: float) -> Tensor:
    assert stop > start
    f = np.float32
    steps = int(math.ceil(f(f(stop) - f(start)) / f(step)))  # ceilf((stop - start) / step)
    return new_op(g, "ARANGE", F32, [steps], [], f32=[start, stop, step])


def fill(a: Tensor, c: float) -> Tensor:
    assert a.type.name in ("f32", "f16") and a.is_contiguous()
    return new_op(a.graph, "FILL", a.type, a.ne, [a], f32=[c])


def tri(a: Tensor, tri_type: int) -> Tensor:
    assert a.type == F32 and a.is_contiguous() and a.ne[0] == a.ne[1]
    return new_op(a.graph, "TRI", a.type, a.ne, [a], i32=[tri_type])


def diag(a: Tensor) -> Tensor:
    assert a.ne[1] == 1
    return new_op(a.graph, "DIAG", a.type, (a.ne[0], a.ne[0], a.ne[2], a.ne[3]), [a])


def diag_mask_inf(a: Tensor, n_past: int) -> Tensor:
    return new_op(a.graph, "DIAG_MASK_INF", a.type, a.ne, [a], i32=[n_past])


def _mul(ne, nr):
    return [n * r for n, r in zip(ne, nr)]


# --- REPEAT / REPEAT_BACK ---

def build_repeat(g, type, ne, nr):
    target = g.new_tensor(type, _mul(ne, nr), "target")
    src = set_param(g.new_tensor(type, ne, "src"))
    assert can_repeat(src, target)
    return repeat(src, target.ne)


def build_repeat_back(g, type, ne, nr, v):
    src = g.new_tensor(type, _mul(ne, nr), "src")
    if v:  # halve every repeated dim: a non-contiguous view of the tiled tensor
        src = strided_view(src, [n if r == 1 else n // 2 for n, r in zip(src.ne, nr)], name="view")
    target = g.new_tensor(type, ne, "target")
    return repeat_back(src, target.ne)


def _repeat_grid():
    for ne3 in (1, 3):
        ne = [10, 5, 4, ne3]
        for type, nr in (("f32", [1, 1, 1, 1]), ("f32", [2, 1, 1, 1]), ("f32", [1, 2, 1, 1]),
                         ("f32", [1, 1, 2, 1]), ("f32", [1, 1, 1, 2]), ("f16", [2, 1, 1, 1]),
                         ("i32", [2, 1, 1, 1]), ("i16", [1, 1, 1, 2]), ("bf16", [2, 1, 1, 1])):
            yield dict(type=type, ne=ne, nr=nr)


def _twice_out(out, p):  # op_size of test_repeat / test_repeat_back
    return 2 * out.nbytes()


register(Family(
    name="repeat", build=build_repeat, vars=("type", "ne", "nr"), op="REPEAT",
    eval_grid=_repeat_grid, op_size=_twice_out,
))

register(Family(
    name="repeat_back", build=build_repeat_back, vars=("type", "ne", "nr", "v"), op="REPEAT_BACK",
    eval_grid=lambda: (dict(type="f32", ne=[8, 6, 4, 2], nr=nr, v=v) for v in (0, 1)
                       for nr in ([1, 1, 1, 1], [2, 1, 1, 1], [1, 2, 1, 1], [1, 1, 2, 1], [1, 1, 1, 2])),
    op_size=_twice_out,
))


# --- CONCAT ---

def build_concat(g, type, ne_a, ne_b_d, dim, v):
    ne_b = list(ne_a)
    ne_b[dim] = ne_b_d
    # v bits: 1 / 2: a / b is a view with gaps in dims 0-2, 4 / 8: with gaps in dims 2-3
    a = leaf_or_view(g, type, ne_a, "a", (2, 4, 3, 1) if v & 1 else (1, 1, 2, 4) if v & 4 else None)
    b = leaf_or_view(g, type, ne_b, "b", (3, 2, 4, 1) if v & 2 else (1, 1, 3, 2) if v & 8 else None)
    return concat(a, b, dim)


def _concat_grid():
    for v in (0, 1, 2, 3):
        for dim in range(4):
            for type in ("f32", "f16", "bf16", "i8", "i16", "i32", "i64"):
                yield dict(type=type, ne_a=[11, 12, 13, 14], ne_b_d=7, dim=dim, v=v)
    for type in ("q4_0", "q4_1", "q5_0", "q5_1", "q8_0"):
        for v in (0, 4, 8, 12):
            for dim in range(4):
                yield dict(type=type, ne_a=[128, 12, 13, 14], ne_b_d=256 if dim == 0 else 7, dim=dim, v=v)


register(Family(
    name="concat", build=build_concat, vars=("type", "ne_a", "ne_b_d", "dim", "v"), op="CONCAT",
    eval_grid=_concat_grid,
))


# --- DUP / CONT ---

def build_dup(g, type, ne, permute=(0, 0, 0, 0)):
    src = set_param(g.new_tensor(type, ne, "src"))
    if any(permute):
        src = _permute(src, permute)
    return dup(src)


def _permute(t, axes):
    p = permute(t, *axes)
    p.name = f"{t.name}_permuted"
    return p


def _dup_vars(p):
    s = fmt_vars(p, ("type", "ne"))
    return s + "," + fmt_vars(p, ("permute",)) if any(p.get("permute", ())) else s


def _dup_grid():
    for type in ("f32", "f16", "i32", "i16"):
        yield dict(type=type, ne=[10, 10, 20, 1])
    for type, ne, perm in (("f32", [10, 10, 5, 1], [0, 2, 1, 3]), ("f16", [10, 10, 5, 1], [0, 2, 1, 3]),
                           ("f32", [10, 10, 5, 1], [1, 0, 2, 3]), ("f16", [10, 10, 5, 1], [1, 0, 2, 3]),
                           ("i16", [10, 8, 3, 1], [0, 2, 1, 3]), ("i16", [10, 8, 3, 1], [1, 2, 0, 3])):
        yield dict(type=type, ne=ne, permute=perm)


register(Family(name="dup", build=build_dup, vars=_dup_vars, op="DUP", eval_grid=_dup_grid))


def build_cont(g, type, ne, use_view_slice, permute=(0, 0, 0, 0)):
    src = set_param(g.new_tensor(type, ne, "src"))
    if any(permute):   # 0.25.3: a permutation instead of the transpose
        a = _permute(src, permute)
    elif use_view_slice:  # one row per (i2, i3), at an element offset of ne1-1
        a = strided_view(src, [src.ne[0], 1, src.ne[2], src.ne[3]], "src_view_slice",
                         src.nb[0] * (src.ne[1] - 1))
    else:
        a = transpose(src)
    return cont(a)


def _cont_grid():
    for type in ("f32", "i32", "f16", "bf16"):
        for use_view_slice in (1, 0):
            if use_view_slice and type in ("f16", "bf16"):
                continue
            for ne in ([2, 1, 1, 1], [2, 1, 3, 5], [2, 3, 5, 7], [1, 4, 4, 1], [1, 8, 17, 1], [10, 10, 10, 1]):
                yield dict(type=type, ne=ne, use_view_slice=use_view_slice)


def _cont_permuted():
    """0.25.3: swaps and a 3-cycle of dims 0-2, small and tile-(un)aligned large shapes."""
    for type in ("f32", "f16"):
        for ne in ([10, 10, 10, 1], [33, 5, 7, 1], [64, 3, 65, 1], [2, 3, 5, 7],
                   [1024, 64, 64, 1], [2304, 64, 64, 1], [1000, 33, 65, 1]):
            for perm in ([2, 1, 0, 3], [1, 2, 0, 3], [0, 2, 1, 3]):
                yield dict(type=type, ne=ne, use_view_slice=0, permute=perm)


register(Family(name="cont", build=build_cont, vars=("type", "ne", "use_view_slice"), op="CONT",
                changes=(new_params("0.25.3", ("type", "ne", "use_view_slice"), add=_cont_permuted,
                                    permute=[0, 0, 0, 0]),),
                eval_grid=_cont_grid))


# --- CPY ---

NO_SHAPE = (-1, -1, -1, -1)
NO_PERM = (0, 0, 0, 0)


def cpy_case(type_src, type_dst, ne_src, ne_dst=NO_SHAPE, permute_src=NO_PERM, permute_dst=NO_PERM,
             transpose_src=False, dst_alloc=NO_PERM):
    """The params of test_cpy(...), with its default arguments."""
    return dict(type_src=type_src, type_dst=type_dst, ne_src=list(ne_src), ne_dst=list(ne_dst),
                permute_src=list(permute_src), permute_dst=list(permute_dst),
                _src_transpose=int(transpose_src), dst_alloc=list(dst_alloc))


def _cpy_vars(p):
    names = ["type_src", "type_dst", "ne_src", "ne_dst", "permute_src", "permute_dst", "_src_transpose"]
    if p["dst_alloc"][0] > 0:
        names.append("dst_alloc")
    elif min(p["ne_dst"]) < 0:
        names.remove("ne_dst")
    return fmt_vars(p, names)


def build_cpy(g, type_src, type_dst, ne_src, ne_dst, permute_src, permute_dst, _src_transpose, dst_alloc):
    src = set_param(g.new_tensor(type_src, ne_src, "src"))
    if any(permute_src):
        src = _permute(src, permute_src)
    if _src_transpose:
        src = transpose(src)
        src.name = "src_transposed"
    ne = ne_dst if min(ne_dst) >= 0 else src.ne
    if dst_alloc[0] > 0:  # dst is a strided view into a larger buffer
        dst = strided_view(g.new_tensor(type_dst, dst_alloc, "dst_buf"), ne, name="dst_view")
    else:
        dst = g.new_tensor(type_dst, ne, "dst")
        if any(permute_dst):
            dst = _permute(dst, permute_dst)
    return cpy(src, dst)


def _cpy_grid():
    """make_test_cases_eval's test_cpy cases, each once: its loops list e.g. f16 -> f32 twice."""
    seen = set()
    for p in _cpy_cases():
        if _cpy_vars(p) not in seen:
            seen.add(_cpy_vars(p))
            yield p


def _cpy_all_types(types):
    """test_cpy's loops over all_types, for these types."""
    for type in types:
        nk = ggml_type(type).blck_size
        for k in (1, 2, 3):
            ne = [k * nk, 2, 3, 4]
            yield cpy_case(type, type, ne)
            yield cpy_case(type, type, ne, NO_SHAPE, [0, 2, 1, 3])
            yield cpy_case(type, type, ne, NO_SHAPE, [0, 3, 1, 2], [0, 2, 1, 3])
    for ts in ("f16", "bf16", "f32"):
        for td in types:
            yield cpy_case(ts, td, [256, 4, 4, 4])
            yield cpy_case(ts, td, [256, 2, 3, 4], NO_SHAPE, [0, 2, 1, 3])
    for ts in types:
        yield cpy_case(ts, "f32", [256, 4, 4, 4])
        yield cpy_case(ts, "f32", [256, 2, 3, 4], NO_SHAPE, [0, 2, 1, 3])


def _cpy_cases():
    yield from _cpy_all_types(ALL_TYPES)
    for ts in ("f16", "f32"):
        for td in ("f16", "f32"):
            yield cpy_case(ts, td, [256, 2, 3, 4], NO_SHAPE, [1, 0, 2, 3])
    yield cpy_case("f32", "q4_0", [96, 1, 1, 1])
    yield cpy_case("q4_0", "f32", [96, 1, 1, 1])
    for ts, td in (("f32", "i32"), ("i32", "f32")):
        yield cpy_case(ts, td, [256, 2, 3, 4])
        yield cpy_case(ts, td, [256, 2, 3, 4], NO_SHAPE, [1, 0, 2, 3])
    for t, ne in (("f16", [256, 4, 3, 1]), ("f32", [256, 4, 3, 1]), ("f32", [256, 4, 3, 3]),
                  ("bf16", [256, 4, 3, 1]), ("f16", [256, 4, 1, 1]), ("f32", [256, 4, 1, 1]),
                  ("bf16", [256, 4, 1, 1]), ("i32", [256, 4, 1, 1])):
        yield cpy_case(t, t, ne, transpose_src=True)
    for t in ("i32", "f32"):
        yield cpy_case(t, t, [256, 1, 4, 1], NO_SHAPE, [1, 2, 0, 3])
    yield cpy_case("f32", "f32", [2, 2097121, 1, 1], NO_SHAPE, [1, 0, 2, 3])
    yield cpy_case("f32", "f32", [2, 2, 524281, 1], NO_SHAPE, [1, 0, 2, 3])
    for t in ("f32", "f16"):  # strided dst
        yield cpy_case(t, t, [128, 2, 3, 1], [128, 2, 3, 1], dst_alloc=[128, 4, 3, 1])
    # reshaping copies: every order of {3, 5, 7, 32} into the sorted and the reversed shape
    canonical, reversed_ = [3, 5, 7, 32], [32, 7, 5, 3]
    for type in ("f32", "f16"):
        for cur in map(list, itertools.permutations(canonical)):
            if cur != canonical:
                yield cpy_case(type, type, cur, canonical)
            if cur != reversed_:
                yield cpy_case(type, type, cur, reversed_)
            if cur[0] == 32 and type == "f32":
                yield cpy_case("q4_0", "q4_0", cur, reversed_)


def _cpy_perf_grid():
    yield cpy_case("f32", "f16", [512, 3072, 1, 1])
    yield cpy_case("f32", "f32", [8192, 512, 2, 1], NO_SHAPE, [0, 2, 1, 3])
    yield cpy_case("f32", "f32", [3072, 512, 2, 1], NO_SHAPE, [0, 2, 1, 3])
    yield cpy_case("f32", "q4_0", [8192, 512, 2, 1])
    yield cpy_case("q4_0", "f32", [8192, 512, 2, 1])
    for t, ne in (("f32", [768 * 1024, 256, 1, 1]), ("f16", [768 * 1024, 256, 1, 1]),
                  ("f16", [768, 1024, 256, 1]), ("bf16", [768, 1024, 256, 1])):
        yield cpy_case(t, t, ne, NO_SHAPE, [1, 0, 2, 3])
    for t, ne in (("f32", [768 * 1024, 256, 1, 1]), ("f32", [768, 1024, 256, 1]),
                  ("f16", [768 * 1024, 256, 1, 1]), ("f16", [768, 1024, 256, 1]),
                  ("bf16", [768, 1024, 256, 1])):
        yield cpy_case(t, t, ne, transpose_src=True)


def cpy_max_nmse(p):
    """test_cpy::max_nmse_err: exact for same-type copies; for a few quantized destinations,
    the error of one quantization step off over values in [-150, 150]."""
    ts, td = p["type_src"], p["type_dst"]
    if ts == td:
        return 0.0
    if td in ("q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1", "q8_0"):
        f = np.float32
        est = f(1.0 / 8.0) * f(150.0)
        est *= {"iq4_nl": f(2.0), "q5_0": f(0.5), "q5_1": f(0.5), "q8_0": f(1.0 / 8.0)}.get(td, f(1.0))
        est = float(est) ** 2
        return est / (float(f(150.0 * 150.0 * 0.25)) * float(math.prod(p["ne_src"])))
    return 1e-6


init_cpy = uniform_init(-150.0, 150.0)  # wide range: f32 <-> i32 conversions are checked


register(Family(
    name="cpy", build=build_cpy, vars=_cpy_vars, op="CPY", init=init_cpy, strict=(QUANTIZED_DST,),
    eval_grid=_cpy_grid, perf_grid=_cpy_perf_grid, max_nmse=cpy_max_nmse,
    # 0.25.3: tq1_0 joins all_types
    changes=(Since("0.25.3", add=lambda: list(_cpy_all_types(NEW_TYPES))),),
    op_size=lambda out, p: out.nbytes() + out.src[0].nbytes(),
    notes={GGML_CPU: Deviation(
        when=lambda p: p["type_src"] in ("f16", "bf16") and p["type_dst"] == "q8_0", reason=(
        "f16/bf16 -> q8_0: ggml-CPU's SIMD quantize_row_q8_0 scales by 127/amax and rounds "
        "ties to even, where ggml's reference quantizer (quantize_row_q8_0_ref, which gguf "
        "reproduces bit for bit) scales by 1/(amax/127) and rounds ties away from zero; "
        "coarse bf16 inputs land on exact .5 ties often (24 of 16384 values one step apart "
        "at seed 0), more than test_cpy's one-value-off threshold allows"))},
    grad_notes={EVERY_DEVICE: fd_limit(
        "inputs span [-150, 150], so the loss (a float32 sum of thousands of them) reaches "
        "|L| ~ 10^4, whose rounding moves each difference quotient by up to ulp/(2*eps) ~ 0.005 "
        "against the exact gradient 1 of a copy", max_error=5e-3)},
))


# --- GET_ROWS ---

def build_get_rows(g, type, n, m, r, be1, be2, v, vs0=False, offset_cols=0):
    if vs0:   # 0.25.3: the source a view 3 rows (and offset_cols columns) into a larger one
        big = g.new_tensor(type, [n + offset_cols, m + 3, be1, be2], "in_padded")
        a = view(big, [n, m, be1, be2], big.nb[1:], offset_cols * big.nb[0] + 3 * big.nb[1])
        a.name = "in_view"
    else:
        a = g.new_tensor(type, [n, m, be1, be2], "in")
    rows = g.new_tensor(I32, [r, be1, be2], "rows")
    if v:  # the first half of each batch's row ids, through a strided view
        rows = strided_view(rows, [r // 2, be1, be2], "view_of_rows")
    if not vs0 and be1 == be2 == 1 and rows.ne[1] == rows.ne[2] == rows.ne[3] == 1:
        set_param(a)   # ggml's backward: a matrix and a vector of row ids only
    return get_rows(a, rows)


def init_get_rows(t, rng, p):
    if t.name == "rows":
        return rng.integers(0, p["m"], size=shape_of(t))
    return None


def _get_rows_vs0():
    """0.25.3: each type's cases with the source a view too, and one with a column offset;
    tq1_0 joins all_types (both forms)."""
    for type in list(NEW_TYPES) + ALL_TYPES + ["i32"]:
        for vs0 in (False, True) if type in NEW_TYPES else (True,):
            for b in (1, 7):
                for v in (0, 1):
                    yield dict(type=type, n=256, m=5, r=4, be1=b, be2=1, v=v, vs0=vs0, offset_cols=0)
    yield dict(type="f32", n=256, m=8, r=2, be1=1, be2=1, v=0, vs0=True, offset_cols=3)


def _get_rows_grid():
    def case(type, n, m, r, be1, be2, v):
        return dict(type=type, n=n, m=m, r=r, be1=be1, be2=be2, v=v)
    for type in ("f32", "q4_0"):
        yield case(type, 300 * 256, 5, 4, 1, 2, 0)
        yield case(type, 256, 80000, 70000, 2, 1, 0)
        yield case(type, 256, 5, 4, 700, 100, 0)
    yield case("f32", 1, 8, 2, 1, 1, 0)
    for type in ALL_TYPES + ["i32"]:
        for b in (1, 7):
            for v in (0, 1):
                yield case(type, 256, 5, 4, b, 1, v)


# ggml-cann (and the native layer, as it) dequantizes q8_0 rows with aclnnMul(INT8 quants,
# FLOAT16 scales, FLOAT out): the deduced type is FLOAT16, so opbase computes each q * d in
# f16 and casts that to f32 (ops-math math/mul/op_api/aclnn_mul.cpp). Measured on CANN-SIM,
# --seed 0: worst relative error 4.7e-4 (f16's 2^-11), NMSE within 1e-7
CANN_Q8_0_F16 = Tolerance(
    "q8_0 rows on CANN are dequantized by aclnnMul of the int8 quants and the f16 scales, "
    "which computes in the deduced FLOAT16: each value is rounded to f16 (2^-11 relative)",
    rtol=2 ** -10, impl=ACLNN, when=lambda p: p["type"] == "q8_0")

register(Family(
    name="get_rows", build=build_get_rows, vars=("type", "n", "m", "r", "be1", "be2", "v"),
    changes=(new_params("0.25.3", ("type", "n", "m", "r", "be1", "be2", "v"), vs0=False, offset_cols=0,
                        add=_get_rows_vs0),),
    op="GET_ROWS", init=init_get_rows, eval_grid=_get_rows_grid, strict=(CANN_Q8_0_F16,),
))


# --- PAD / PAD_REFLECT_1D / ROLL ---

def build_pad(g, type, ne_a, pad_0, pad_1, circular):
    a = g.new_tensor(type, ne_a, "a")
    return pad_ext(a, 0, pad_0, 0, pad_1, 0, 0, 0, 0, circular)


def build_pad_ext(g, type, ne_a, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3, tfrm, circular):
    a = g.new_tensor(type, ne_a, "a")
    if tfrm == 1:  # the first half of every dim: a strided view
        a = strided_view(a, [(n + 1) // 2 for n in a.ne], name="view of a")
    elif tfrm == 2:
        a = _permute(a, (2, 1, 0, 3))
    return pad_ext(a, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3, circular)


def _pad_grid():
    yield dict(type="f32", ne_a=[512, 512, 1, 1], pad_0=1, pad_1=1, circular=0)
    yield dict(type="f32", ne_a=[33, 17, 2, 1], pad_0=4, pad_1=3, circular=1)
    for ne_a, p0, p1 in (([1024, 1, 1, 1], 1, 0), ([1024, 2, 1, 1], 1, 0), ([1024, 16, 1, 1], 0, 1),
                         ([1023, 1, 1, 1], 1, 0), ([1023, 8, 1, 1], 1, 0), ([1025, 1, 1, 1], 1, 0),
                         ([1025, 8, 1, 1], 1, 0), ([2048, 1, 1, 1], 1, 0), ([2048, 4, 1, 1], 1, 0),
                         ([2049, 1, 1, 1], 1, 0), ([100, 1, 1, 1], 100, 0), ([100, 1, 1, 1], 0, 100),
                         ([100, 100, 1, 1], 50, 50)):
        yield dict(type="f32", ne_a=ne_a, pad_0=p0, pad_1=p1, circular=0)


PAD_EXT_VARS = ("type", "ne_a", "lp0", "rp0", "lp1", "rp1", "lp2", "rp2", "lp3", "rp3", "tfrm", "circular")


def _pad_ext_grid():
    yield dict(zip(PAD_EXT_VARS, ("f32", [512, 512, 3, 1], 1, 1, 1, 1, 1, 1, 1, 1, 0, 0)))
    for tfrm in (0, 1, 2):
        for circular in (0, 1):
            yield dict(zip(PAD_EXT_VARS, ("f32", [512, 512, 1, 1], 0, 1, 0, 1, 0, 0, 0, 0, tfrm, circular)))
            yield dict(zip(PAD_EXT_VARS, ("f32", [11, 22, 33, 44], 1, 2, 3, 4, 5, 6, 7, 8, tfrm, circular)))


register(Family(name="pad", build=build_pad, vars=("type", "ne_a", "pad_0", "pad_1", "circular"),
                op="PAD", eval_grid=_pad_grid))
register(Family(name="pad_ext", build=build_pad_ext, vars=PAD_EXT_VARS, op="PAD", eval_grid=_pad_ext_grid,
                changes=(Since("0.25.3", add=lambda: (   # padding on the right only
                    dict(zip(PAD_EXT_VARS, ("f32", [11, 22, 33, 44], 0, 2, 0, 4, 0, 6, 0, 8, tfrm, circular)))
                    for tfrm in (0, 1, 2) for circular in (0, 1))),)))


def build_pad_reflect_1d(g, type, ne_a, pad_0, pad_1):
    a = g.new_tensor(type, ne_a[:2], "a")  # test-backend-ops makes `a` 2-D: ne_a[2:] are unused
    return pad_reflect_1d(a, pad_0, pad_1)


register(Family(
    name="pad_reflect_1d", build=build_pad_reflect_1d, vars=("type", "ne_a", "pad_0", "pad_1"),
    op="PAD_REFLECT_1D",
    eval_grid=lambda: (dict(type="f32", ne_a=ne, pad_0=10, pad_1=9)
                       for ne in ([512, 34, 2, 1], [3000, 384, 4, 1])),
    perf_grid=lambda: (dict(type="f32", ne_a=ne, pad_0=10, pad_1=9)
                       for ne in ([512, 34, 2, 1], [3000, 80, 1, 1], [3000, 80, 4, 1],
                                  [3000, 384, 1, 1], [3000, 384, 4, 1])),
))


def build_roll(g, shift0, shift1, shift3, shift4, permute):
    a = g.new_tensor(F32, [10, 5, 4, 3], "a")
    if permute:  # roll only needs nb[0] == type size
        a = _permute(a, (0, 2, 1, 3))
    return roll(a, shift0, shift1, shift3, shift4)


register(Family(
    name="roll", build=build_roll, vars=("shift0", "shift1", "shift3", "shift4", "permute"), op="ROLL",
    eval_grid=lambda: (dict(shift0=3, shift1=-2, shift3=1, shift4=-1, permute=p) for p in (0, 1)),
))


# --- ARANGE / FILL / TRI / DIAG / DIAG_MASK_INF ---

register(Family(
    name="arange", build=lambda g, type, start, stop, step: arange(g, start, stop, step),
    vars=("type", "start", "stop", "step"), op="ARANGE",
    eval_grid=lambda: (dict(type="f32", start=0.0, stop=stop, step=1.0) for stop in (10.0, 1048576.0)),
))


def build_fill(g, type, ne, c):
    return fill(set_param(g.new_tensor(type, ne, "a")), c)


register(Family(
    name="fill", build=build_fill, vars=("type", "ne", "c"), op="FILL",
    eval_grid=lambda: (dict(type="f32", ne=ne, c=c) for c, ne in (
        (0.0, [10, 10, 4, 3]), (2.0, [303, 207, 11, 3]), (-152.0, [800, 600, 4, 4]), (3.5, [2048, 512, 2, 2]))),
))


register(Family(
    name="tri", build=lambda g, type, ne, tri_type: tri(set_param(g.new_tensor(type, ne, "a")), tri_type),
    vars=("type", "ne", "tri_type"), op="TRI",
    eval_grid=lambda: (dict(type="f32", ne=[10, 10, 4, 3], tri_type=t)
                       for t in (TRI_LOWER, TRI_LOWER_DIAG, TRI_UPPER, TRI_UPPER_DIAG)),
    perf_grid=lambda: (dict(type="f32", ne=[256, 256, 4, 4], tri_type=TRI_LOWER),
                       dict(type="f32", ne=[1024, 1024, 8, 4], tri_type=TRI_UPPER_DIAG)),
))


register(Family(
    name="diag", build=lambda g, type, ne: diag(set_param(g.new_tensor(type, ne, "a"))), vars=("type", "ne"), op="DIAG",
    eval_grid=lambda: (dict(type="f32", ne=ne) for ne in ([10, 1, 4, 3], [79, 1, 19, 13], [256, 1, 8, 16])),
))


register(Family(
    name="diag_mask_inf", build=lambda g, type, ne, n_past: diag_mask_inf(set_param(g.new_tensor(type, ne, "a")), n_past),
    vars=("type", "ne", "n_past"), op="DIAG_MASK_INF",
    eval_grid=lambda: (dict(type="f32", ne=ne, n_past=5) for ne in ([10, 10, 1, 1], [10, 10, 3, 1], [10, 10, 3, 2])),
))
