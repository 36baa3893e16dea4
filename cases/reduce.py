"""Reductions, scans and sorts along rows: test_sum (SUM), test_sum_rows (SUM_ROWS),
test_mean (MEAN), test_argmax (ARGMAX), test_count_equal (COUNT_EQUAL), test_cumsum
(CUMSUM) and test_argsort (ARGSORT)."""
from __future__ import annotations

import numpy as np

from .catalog import Deviation, Family, fmt_vars, new_params, register
from .tolerances import RUNNING_SUMS
from .graph import Tensor, new_op, set_param, view
from .graph import permute as permute_view  # `permute` is also a case parameter
from .inputs import shape_of, shuffled_rows, uniform_init
from .types import F32, I32, I64
from .implementations import GGML_CPU

SORT_ASC, SORT_DESC = 0, 1  # enum ggml_sort_order


# --- constructors (ggml.c) ---

def sum_all(a: Tensor) -> Tensor:
    """ggml_sum: every element summed into a 1-element tensor of a's type."""
    return new_op(a.graph, "SUM", a.type, [1], [a])


def sum_rows(a: Tensor) -> Tensor:
    return new_op(a.graph, "SUM_ROWS", a.type, [1, *a.ne[1:]], [a])


def mean(a: Tensor) -> Tensor:
    return new_op(a.graph, "MEAN", F32, [1, *a.ne[1:]], [a])


def argmax(a: Tensor) -> Tensor:
    """ggml_argmax: index of each row's maximum (a must be a matrix)."""
    assert a.ne[2] == 1 and a.ne[3] == 1, "ggml_argmax needs a matrix"
    return new_op(a.graph, "ARGMAX", I32, [a.ne[1]], [a])


def count_equal(a: Tensor, b: Tensor) -> Tensor:
    """ggml_count_equal: number of equal elements, as one i64."""
    assert a.ne == b.ne
    return new_op(a.graph, "COUNT_EQUAL", I64, [1], [a, b])


def cumsum(a: Tensor) -> Tensor:
    """ggml_cumsum: inclusive prefix sums along ne0."""
    assert a.type == F32
    return new_op(a.graph, "CUMSUM", a.type, a.ne, [a])


def argsort(a: Tensor, order: int = SORT_ASC) -> Tensor:
    return new_op(a.graph, "ARGSORT", I32, a.ne, [a], i32=[order])


# --- inputs ---

# not centred on zero: keeps sums away from catastrophic cancellation
init_shifted = uniform_init(-0.9, 1.1)


def init_distinct_rows(t, rng, p):
    """f32 rows that are shuffled 0, 1, ..., ne0-1: no ties for argmax / argsort."""
    if t.type != F32:
        return None
    return shuffled_rows(rng, np.arange(t.ne[0], dtype=np.float32), t.nrows()).reshape(shape_of(t))


# --- test_sum ---

def build_sum(g, type, ne, permute=None):
    a = set_param(g.new_tensor(type, ne, "a"))
    if permute:
        a = permute_view(a, *permute)
        a.name = "a_permuted"
    out = sum_all(a)
    out.name = "out"
    return out


def sum_vars(p):
    # the permutation is printed only when one is used
    return fmt_vars(p, ("type", "ne", "permute") if p.get("permute") else ("type", "ne"))


REDUCE_ROWS_PERF = ([8192, 1, 1, 1], [8192, 8192, 1, 1], [128, 8192, 1, 1])

SUM_STRIDED_ROWS = Deviation(when=lambda p: bool(p.get("permute")), reason=(
    "ggml-CPU's SUM reads each row of its source as ne0 contiguous floats: it checks "
    "nb0 == sizeof(float) only with a debug assert, and its supports_op accepts any "
    "layout. With permute=[1,0,2,3] (ne0 strided) it sums overlapping runs of memory "
    "instead of the view's elements; the reference sums the view."))

register(Family(
    name="sum",
    build=build_sum,
    vars=sum_vars,
    op="SUM",
    init=init_shifted,
    grad_eps=lambda p: 0.1 * float(np.sqrt(np.prod(p["ne"]))),
    eval_grid=lambda: [
        dict(type="f32", ne=[10, 5, 4, 3]),
        dict(type="f32", ne=[11, 5, 6, 3], permute=[0, 2, 1, 3]),  # rows contiguous
        dict(type="f32", ne=[11, 5, 6, 3], permute=[0, 3, 2, 1]),
        dict(type="f32", ne=[11, 5, 6, 3], permute=[0, 1, 3, 2]),
        dict(type="f32", ne=[33, 1, 1, 1]),
        dict(type="f32", ne=[33, 1024, 1, 1]),
        dict(type="f32", ne=[33, 256, 1, 1]),
        dict(type="f32", ne=[33, 256, 1, 1], permute=[1, 0, 2, 3]),  # rows strided
    ],
    perf_grid=lambda: [dict(type="f32", ne=ne) for ne in REDUCE_ROWS_PERF],
    notes={GGML_CPU: SUM_STRIDED_ROWS},
    grad_notes={GGML_CPU: SUM_STRIDED_ROWS},   # its wrong forward is what the differences see
))


# --- test_sum_rows ---

def build_sum_rows(g, type, ne, permute, slice):
    a = set_param(g.new_tensor(type, ne, "a"))
    if slice:
        # every other plane of dim 2, planes of dim 3 from the second on
        a = view(a, [ne[0], ne[1], ne[2] // 2, ne[3] - 1], [a.nb[1], a.nb[2] * 2, a.nb[3]], a.nb[3])
    if permute:
        a = permute_view(a, 0, 2, 3, 1)
    out = sum_rows(a)
    out.name = "out"
    return out


def sum_rows_case(ne, permute=False, slice=False):
    return dict(type="f32", ne=ne, permute=permute, slice=slice)


register(Family(
    name="sum_rows",
    build=build_sum_rows,
    vars=("type", "ne", "permute", "slice"),
    op="SUM_ROWS",
    eval_grid=lambda: [sum_rows_case([10, 5, 4, 3])] + [
        sum_rows_case([n0, 5, 6, 3], p, s) for n0 in (11, 16)
        for p, s in ((True, False), (False, True), (True, True))] + [
        sum_rows_case(ne) for ne in ([33, 1, 1, 1], [33, 1024, 1, 1], [33, 256, 1, 1])],
    perf_grid=lambda: [sum_rows_case(ne) for ne in REDUCE_ROWS_PERF],
))


# --- test_mean ---

def build_mean(g, type, ne, permute=False, slice=False):
    a = set_param(g.new_tensor(type, ne, "a"))
    if slice:      # 0.25.3: every other plane of dim 2, the last ne3-1 of dim 3
        a = view(a, [ne[0], ne[1], ne[2] // 2, ne[3] - 1], [a.nb[1], a.nb[2] * 2, a.nb[3]], a.nb[3])
    if permute:    # 0.25.3: a non-contiguous source
        a = permute_view(a, 0, 2, 3, 1)
    out = mean(a)
    out.name = "out"
    return out


register(Family(
    name="mean",
    build=build_mean,
    vars=("type", "ne"),
    op="MEAN",
    changes=(new_params("0.25.3", ("type", "ne"), permute=False, slice=False,
                        add=lambda: [dict(type="f32", ne=[11, 5, 6, 3], permute=p, slice=s)
                                     for p, s in ((True, False), (False, True), (True, True))]),),
    init=init_shifted,
    grad_eps=lambda p: 0.1 * float(np.prod(p["ne"])),
    eval_grid=lambda: [dict(type="f32", ne=ne) for ne in (
        [10, 5, 4, 3], [33, 1, 1, 1], [33, 256, 1, 1], [32769, 1, 1, 1],
        [32, 1, 1, 1], [32, 256, 1, 1], [32768, 1, 1, 1])],
    perf_grid=lambda: [dict(type="f32", ne=ne) for ne in ([256, 256, 3, 1], *REDUCE_ROWS_PERF)],
))


# --- test_argmax / test_count_equal ---

def build_argmax(g, type, ne):
    out = argmax(g.new_tensor(type, ne, "a"))
    out.name = "out"
    return out


register(Family(
    name="argmax",
    build=build_argmax,
    vars=("type", "ne"),
    op="ARGMAX",
    init=init_distinct_rows,
    max_nmse=0.0,
    eval_grid=lambda: [dict(type="f32", ne=[n0, n1, 1, 1]) for n0, n1 in (
        (32, 1), (32, 513), (100, 10), (1024, 10), (1024, 12), (2000, 10), (5438, 3))],
    perf_grid=lambda: [dict(type="f32", ne=[n0, n1, 1, 1]) for n0, n1 in (
        (32, 10), (1024, 10), (32000, 512))],
))


def build_count_equal(g, type, ne):
    a_argmax = argmax(g.new_tensor(type, ne, "a"))
    a_argmax.name = "a_argmax"
    b_argmax = argmax(g.new_tensor(type, ne, "b"))
    b_argmax.name = "b_argmax"
    out = count_equal(a_argmax, b_argmax)
    out.name = "out"
    return out


register(Family(
    name="count_equal",
    build=build_count_equal,
    vars=("type", "ne"),
    op="COUNT_EQUAL",
    init=init_distinct_rows,
    max_nmse=0.0,
    eval_grid=lambda: [dict(type="f32", ne=[4, n1, 1, 1]) for n1 in (500, 5000)],
))


# --- test_cumsum ---

def build_cumsum(g, type, ne):
    out = cumsum(set_param(g.new_tensor(type, ne, "a")))
    out.name = "out"
    return out


register(Family(
    name="cumsum",
    strict=(RUNNING_SUMS,),
    build=build_cumsum,
    vars=("type", "ne"),
    op="CUMSUM",
    eval_grid=lambda: [dict(type="f32", ne=ne) for ne in (
        [10, 5, 4, 3], [127, 5, 4, 3], [128, 5, 4, 3], [128, 128, 4, 4],
        *([n0, 5, 4, 3] for n0 in (255, 256, 511, 512, 1023, 1024, 2047, 2048)),
        [201 * 1204, 1, 1, 1], [312 * 1205, 1, 1, 1], [20481, 4, 1, 1])],
    perf_grid=lambda: [dict(type="f32", ne=ne) for ne in (
        [128, 128, 4, 4], [2048, 16, 5, 4], [20000, 10, 4, 1])] + [
        dict(type="f32", ne=[cols, nrows, 1, 1]) for nrows in (1, 4, 8, 16)
        for cols in (128, 1024, 4096, 8192, 16384, 32768, 65536, 131072, 200000, 2000000)],
))


# --- test_argsort ---

def build_argsort(g, type, ne, order):
    out = argsort(g.new_tensor(type, ne, "a"), order)
    out.name = "out"
    return out


def argsort_eval():
    # test-backend-ops lists the 1-row sizes twice (once per order loop, always ascending):
    # the names are equal, so they appear here once
    out = [dict(type="f32", ne=[n, 1, 1, 1], order=SORT_ASC)
           for k in range(2, 21) for n in (2**k - 1, 2**k)]
    for order in (SORT_ASC, SORT_DESC):
        out += [dict(type="f32", ne=ne, order=order) for ne in (
            [16, 10, 10, 10], [60, 10, 10, 10], [1023, 2, 1, 3], [1024, 2, 1, 3],
            [1025, 2, 1, 3], [1025, 256, 1, 1], [2047, 2, 1, 3], [2048, 2, 1, 3],
            [2049, 2, 1, 3], [2, 8, 8192, 1], [2048, 512, 1, 1])]
    return out


register(Family(
    name="argsort",
    build=build_argsort,
    vars=("type", "ne", "order"),
    op="ARGSORT",
    init=init_distinct_rows,
    eval_grid=argsort_eval,
    perf_grid=lambda: [dict(type="f32", ne=[n0, n1, 1, 1], order=SORT_ASC)
                       for n0, n1 in ((65000, 16), (200000, 1), (200000, 16))],
))
