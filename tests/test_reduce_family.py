"""Reduce family (SUM, SUM_ROWS, MEAN, ARGMAX, COUNT_EQUAL, CUMSUM, ARGSORT): the NumPy
reference on inputs whose results are known by hand, and catalog cases through NUMPY."""
import numpy as np
import pytest

from cannops.backend import reference
from cannops.backend.numpy_device import NumpyDevice
from cannops.cases import reduce as fam
from cannops.cases.catalog import FAMILIES, Case
from cannops.cases.graph import Graph, permute
from _reference import run


def case(family, **params):
    c = Case(FAMILIES[family], params)
    g = c.build()
    inputs = c.init_inputs(g, seed=3)
    outs = NumpyDevice().run(c, g, inputs, [t.index for t in g.nodes()]).outputs
    return c, g, inputs, outs


def test_sum_of_a_permuted_view():
    g = Graph()
    a = g.new_tensor("f32", [4, 3, 2])
    out = fam.sum_all(permute(a, 2, 0, 1, 3))
    assert out.ne == (1, 1, 1, 1)
    assert run(g, out, {a: np.arange(24)}).item() == 24 * 23 / 2


def test_sum_rows_and_mean():
    g = Graph()
    a = g.new_tensor("f32", [4, 3])
    rows = [[1, 2, 3, 6], [0, 0, 0, 8], [-1, 1, -1, 1]]
    s, m = fam.sum_rows(a), fam.mean(a)
    assert s.ne == m.ne == (1, 3, 1, 1)
    np.testing.assert_array_equal(run(g, s, {a: rows}).ravel(), [12, 8, 0])
    np.testing.assert_array_equal(run(g, m, {a: rows}).ravel(), [3, 2, 0])


def test_sum_rows_of_a_sliced_permuted_view():
    c, g, inputs, outs = case("sum_rows", type="f32", ne=[11, 5, 6, 3], permute=True, slice=True)
    leaf = g.leaves[0]
    assert g.out.src[0].ne == (11, 2, 5, 3)
    lv = inputs[leaf.index]
    sliced = lv[1:3, 0:6:2]                          # planes 1.. of dim 3, every other of dim 2
    expect = sliced.transpose(1, 2, 0, 3).sum(-1, keepdims=True)
    np.testing.assert_allclose(outs[g.out.index], expect, rtol=1e-6)


def test_argmax_and_count_equal():
    g = Graph()
    a, b = g.new_tensor("f32", [3, 2]), g.new_tensor("f32", [3, 2])
    ia, ib = fam.argmax(a), fam.argmax(b)
    out = fam.count_equal(ia, ib)
    assert out.type.name == "i64" and ia.type.name == "i32" and ia.ne == (2, 1, 1, 1)
    data = {a: [[3, 9, 1], [7, 2, 5]], b: [[0, 4, 1], [1, 2, 3]]}
    np.testing.assert_array_equal(run(g, ia, data).ravel(), [1, 0])
    np.testing.assert_array_equal(run(g, ib, data).ravel(), [1, 2])
    assert run(g, out, data).item() == 1


def test_distinct_rows_init():
    c, g, inputs, outs = case("argmax", type="f32", ne=[100, 10, 1, 1])
    rows = inputs[g.leaves[0].index].reshape(10, 100)
    assert (np.sort(rows, axis=1) == np.arange(100)).all()
    np.testing.assert_array_equal(outs[g.out.index].ravel(), np.nonzero(rows == 99)[1])


def test_count_equal_case():
    c, g, inputs, outs = case("count_equal", type="f32", ne=[4, 500, 1, 1])
    a, b = (inputs[t.index].reshape(500, 4) for t in g.leaves)
    assert outs[g.out.index].item() == np.sum((a == 3).nonzero()[1] == (b == 3).nonzero()[1])


def test_cumsum():
    g = Graph()
    a = g.new_tensor("f32", [4, 2])
    res = run(g, fam.cumsum(a), {a: [[1, 2, 3, 4], [1, -1, 1, -1]]})
    np.testing.assert_array_equal(res[0, 0], [[1, 3, 6, 10], [1, 0, 1, 0]])


def test_cumsum_long_row_accumulates_without_drift():
    g = Graph()
    n = 1 << 20
    a = g.new_tensor("f32", [n])
    res = run(g, fam.cumsum(a), {a: np.full(n, 0.1, np.float32)})
    # 0.1f summed 2^20 times in f32 drifts by ~1e-3 relative; exact (f64) sums do not
    expect = np.arange(1, n + 1) * np.float64(np.float32(0.1))
    np.testing.assert_allclose(res.ravel(), expect, rtol=1e-7)


@pytest.mark.parametrize("order,expect", [(fam.SORT_ASC, [[1, 3, 0, 2], [0, 1, 2, 3]]),
                                          (fam.SORT_DESC, [[2, 0, 3, 1], [3, 2, 1, 0]])])
def test_argsort(order, expect):
    g = Graph()
    a = g.new_tensor("f32", [4, 2])
    out = fam.argsort(a, order)
    assert out.type.name == "i32" and out.param_i32(0) == order
    res = run(g, out, {a: [[0.5, -2, 7, 0.25], [1, 2, 3, 4]]})
    np.testing.assert_array_equal(res[0, 0], expect)


def test_argsort_case_sorts_every_row():
    c, g, inputs, outs = case("argsort", type="f32", ne=[60, 10, 10, 10], order=fam.SORT_DESC)
    x = inputs[g.leaves[0].index]
    idx = outs[g.out.index]
    assert idx.dtype == np.int32
    np.testing.assert_array_equal(np.take_along_axis(x, idx.astype(np.int64), -1),
                                  np.broadcast_to(np.arange(59, -1, -1, dtype=np.float32), x.shape))


def test_names():
    assert Case(FAMILIES["sum"], dict(type="f32", ne=[10, 5, 4, 3])).name == "SUM(type=f32,ne=[10,5,4,3])"
    assert (Case(FAMILIES["sum"], dict(type="f32", ne=[33, 256, 1, 1], permute=[1, 0, 2, 3])).name
            == "SUM(type=f32,ne=[33,256,1,1],permute=[1,0,2,3])")
    names = [Case(FAMILIES["argsort"], p).name for p in fam.argsort_eval()]
    assert len(names) == len(set(names)) == 19 * 2 + 22


# --- against ggml (conftest.py's ggml_cpu: skipped where the bridge is not built) ---

FAMS = ("sum", "sum_rows", "mean", "argmax", "count_equal", "cumsum", "argsort")


def test_every_graph_is_what_ggml_constructors_build(ggml_cpu):
    from cannops.cases import all_cases
    for c in all_cases("test") + all_cases("perf"):
        if c.family.name in FAMS:
            ggml_cpu.replay(c.build()).free()


@pytest.mark.parametrize("family,params", [
    ("sum", dict(type="f32", ne=[11, 5, 6, 3], permute=[0, 3, 2, 1])),
    ("sum_rows", dict(type="f32", ne=[16, 5, 6, 3], permute=True, slice=True)),
    ("mean", dict(type="f32", ne=[33, 256, 1, 1])),
    ("count_equal", dict(type="f32", ne=[4, 500, 1, 1])),
    ("cumsum", dict(type="f32", ne=[20481, 4, 1, 1])),
    ("argsort", dict(type="f32", ne=[1025, 2, 1, 3], order=fam.SORT_DESC)),
])
def test_agrees_with_ggml_cpu(ggml_cpu, family, params):
    c = Case(FAMILIES[family], params)
    g = c.build()
    inputs = c.init_inputs(g, seed=5)
    check = [t.index for t in g.nodes() if not t.is_view()]
    got = ggml_cpu.run(c, g, inputs, check)
    assert not got.problems
    mem = reference.compute(g, inputs)
    for i in check:
        ref = mem.read(g.tensors[i]).astype(np.float64)
        out = got.outputs[i].astype(np.float64)
        assert np.sum((ref - out) ** 2) <= c.family.threshold(c.params) * np.sum(ref ** 2)


def test_ggml_cpu_sum_ignores_a_strided_ne0(ggml_cpu):
    """The recorded deviation: ggml-CPU sums each row as ne0 contiguous floats."""
    c = Case(FAMILIES["sum"], dict(type="f32", ne=[33, 256, 1, 1], permute=[1, 0, 2, 3]))
    g = c.build()
    inputs = c.init_inputs(g, seed=5)
    got = ggml_cpu.run(c, g, inputs, [g.out.index]).outputs[g.out.index].item()
    flat = inputs[g.leaves[0].index].ravel().astype(np.float64)
    assert got == pytest.approx(sum(flat[i:i + 256].sum() for i in range(33)), rel=1e-5)
    assert got != pytest.approx(flat.sum(), rel=1e-3)
    assert ggml_cpu.implements == ("ggml-cpu",) and "ggml-cpu" in c.family.notes


def test_perf_grids():
    # make_test_cases_perf: 3 + 4 x 10 cumsum shapes, mean/sum_rows/sum over the
    # reduce-rows shapes (mean also [256,256,3,1]), 3 argmax and 3 argsort shapes
    counts = {f: len(list(FAMILIES[f].perf_grid())) for f in FAMS}
    assert counts == dict(sum=3, sum_rows=3, mean=4, argmax=3, count_equal=0, cumsum=43, argsort=3)
    names = [Case(FAMILIES["cumsum"], p, "perf").name for p in FAMILIES["cumsum"].perf_grid()]
    assert len(set(names)) == 43 and "CUMSUM(type=f32,ne=[2000000,16,1,1])" in names
