"""test_set_rows (SET_ROWS): rows of a source scattered into a destination by row ids
(i32 or i64), converting f32/f16 into any destination type, quantized ones included
(the KV-cache write of LLM inference). `set_rows` is the constructor other cases reuse
(ROPE_SET_ROWS)."""
from __future__ import annotations

import numpy as np

from .catalog import Family, Since, register
from .tolerances import QUANTIZED_DST
from .graph import Tensor, strided_view, view_of
from .inputs import shape_of, shuffled_rows
from .movement import ALL_TYPES, NEW_TYPES
from .types import F16, F32, I32, I64, ggml_type


def set_rows(a: Tensor, b: Tensor, c: Tensor) -> Tensor:
    """ggml_set_rows: a[i3, i2, c[i, i2 % c.ne1, i3 % c.ne2], :] = b[i3, i2, i, :] for each
    of b's ne1 rows. The result is a view of a (the write is in place); src = [b, c, a]."""
    assert a.ne[0] == b.ne[0] and a.ne[2] == b.ne[2] and a.ne[3] == b.ne[3]
    assert b.ne[1] == c.ne[0] and b.ne[2] % c.ne[1] == 0 and b.ne[3] % c.ne[2] == 0 and c.ne[3] == 1
    assert b.type in (F32, F16) and c.type in (I64, I32)
    assert a.nb[0] == a.type.type_size and b.nb[0] == b.type.type_size  # ggml_is_contiguous_rows
    t = view_of(a, "SET_ROWS", a.ne, a.nb)
    t.src = [b, c, a]
    return t


def build_set_rows(g, type_src, type_dst, type_idx, ne, nr23, r, v):
    n2, n3 = ne[2] * nr23[0], ne[3] * nr23[1]
    dst = g.new_tensor(type_dst, [ne[0], ne[1], n2, n3], "dst")
    src = g.new_tensor(type_src, [ne[0], r, n2, n3], "src")
    row_idxs = g.new_tensor(type_idx, [r, ne[2], ne[3]], "row_idxs")
    if v:  # the first half of the rows and of their ids, through strided views
        src = strided_view(src, [ne[0], r // 2, n2, n3])
        row_idxs = strided_view(row_idxs, [r // 2, ne[2], ne[3]], "view_of_rows")
    out = set_rows(dst, src, row_idxs)
    out.name = "out"
    return out


def init_set_rows(t, rng, p):
    """Row ids: per (i1, i2) of the id tensor, distinct rows of the destination (a shuffled
    prefix of 0..ne1-1), so that no row is written twice; everything else uniform [-1, 1]."""
    if not t.type.is_int:
        return None
    n_rows = p["ne"][1]
    return shuffled_rows(rng, np.arange(n_rows), t.nrows())[:, :t.ne[0]].reshape(shape_of(t))


def set_rows_max_nmse(p) -> float:
    """test_set_rows::max_nmse_err: one quantized value off by one step, for the 4-5-8-bit
    block types (in float arithmetic, as there); 1e-7 for everything else."""
    td, ts = p["type_dst"], p["type_src"]
    if td not in ("q2_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1", "q8_0"):
        return 1e-7
    f = np.float32
    est = f(1.0 / 8.0)
    if ts == "f16" and td == "q2_0":
        est *= f(4.0)
    if td in ("q5_0", "q5_1"):
        est /= f(2.0)
    if td == "q8_0":
        est /= f(8.0)
    est *= est
    if ts == "f16":
        est *= f(16.0)
    ne, nr23 = p["ne"], p["nr23"]
    est /= f(0.25) * f(ne[0] * p["r"] * ne[2] * nr23[0] * ne[3] * nr23[1])
    return float(est)


def _case(type_src, type_dst, type_idx, ne, nr23, r, v=False):
    return dict(type_src=type_src, type_dst=type_dst, type_idx=type_idx, ne=list(ne),
                nr23=list(nr23), r=r, v=v)


def set_rows_eval_grid():
    yield _case("f32", "f32", "i64", [1, 8, 1, 3], [1, 1], 2)
    yield _case("f32", "f32", "i32", [1, 8, 1, 3], [1, 1], 2)
    yield _case("f32", "q8_0", "i32", [256, 5, 1, 3], [1, 1], 1)
    yield from _set_rows_all_types(ALL_TYPES)
    for idx in ("i64", "i32"):
        yield _case("f16", "f16", idx, [1, 8, 1, 3], [1, 1], 2)
    for idx in ("i64", "i32"):
        yield _case("f16", "f16", idx, [1, 8, 1, 3], [1, 1], 2, True)


def _set_rows_all_types(types):
    """test_set_rows' loop over all_types, for these types."""
    for ts in ("f16", "f32"):
        for td in types:
            blck = ggml_type(td).blck_size
            for b in (1, 7):
                for v in (False, True):
                    yield _case(ts, td, "i64", [256, 5, b, 3], [1, 1], 1, v)      # one row per plane
                    yield _case(ts, td, "i64", [256, 11, 1, b], [2, 3], 7, v)     # ids broadcast over 2, 3
                    yield _case(ts, td, "i64", [3 * blck, 3, b, 1], [2, 3], 2, v)  # three blocks a row
                    if blck == 1:  # rows that are no multiple of a SIMD width
                        yield _case(ts, td, "i64", [31, 3, b, 1], [2, 3], 2, v)
                        yield _case(ts, td, "i64", [33, 5, 1, b], [2, 3], 1, v)


register(Family(
    name="set_rows",
    strict=(QUANTIZED_DST,),
    build=build_set_rows,
    vars=("type_src", "type_dst", "type_idx", "ne", "nr23", "r", "v"),
    op="SET_ROWS",
    init=init_set_rows,
    max_nmse=set_rows_max_nmse,
    eval_grid=lambda: list(set_rows_eval_grid()),
    changes=(Since("0.25.3", add=lambda: list(_set_rows_all_types(NEW_TYPES))),),   # tq1_0 joins all_types
))
