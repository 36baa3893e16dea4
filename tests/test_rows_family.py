"""SET_ROWS: the constructor, the reference on hand-checkable inputs (broadcast ids, a
quantized destination written row by row), the catalog, and sampled cases on GGML-CPU."""
import numpy as np
import pytest

from cannops.backend import reference
from cannops.cases import FAMILIES, Case
from cannops.cases.graph import Graph
from cannops.cases.rows import set_rows, set_rows_max_nmse

from _sample import assert_ok, cases_of, sample


def test_set_rows_is_a_view_of_the_destination():
    g = Graph()
    a, b, c = g.new_tensor("q8_0", [64, 5, 2, 3]), g.new_tensor("f32", [64, 2, 2, 3]), g.new_tensor("i32", [2, 1, 3])
    t = set_rows(a, b, c)
    assert t.view_src is a and t.src == [b, c, a] and t.ne == a.ne and t.nb == a.nb and t.type == a.type
    with pytest.raises(AssertionError):
        set_rows(a, g.new_tensor("bf16", [64, 2, 2, 3]), c)   # rows come as f32 or f16 only


def _run(g, inputs):
    g.out = g.tensors[-1]
    return reference.compute(g, inputs)


def test_reference_scatters_rows_with_tiled_ids():
    g = Graph()
    a, b, c = g.new_tensor("f32", [2, 4, 2, 1]), g.new_tensor("f32", [2, 2, 2, 1]), g.new_tensor("i64", [2, 1, 1])
    out = set_rows(a, b, c)
    dst = -np.ones((1, 2, 4, 2), np.float32)
    src = np.arange(8, dtype=np.float32).reshape(1, 2, 2, 2)
    mem = _run(g, {a.index: dst, b.index: src, c.index: np.array([[[[3, 0]]]], np.int64)})
    got = mem.read(out)
    # one id row serves both planes of dim 2 (tiling): row 0 of each plane -> 3, row 1 -> 0
    for p in range(2):
        np.testing.assert_array_equal(got[0, p, 3], src[0, p, 0])
        np.testing.assert_array_equal(got[0, p, 0], src[0, p, 1])
        np.testing.assert_array_equal(got[0, p, 1:3], -1)


def test_quantized_destination_keeps_untouched_blocks():
    from gguf.quants import quantize
    g = Graph()
    a, b, c = g.new_tensor("q4_1", [32, 3]), g.new_tensor("f32", [32, 1]), g.new_tensor("i32", [1])
    set_rows(a, b, c)
    rng = np.random.default_rng(0)
    blocks = quantize(rng.uniform(-1, 1, (1, 1, 3, 32)).astype(np.float32), a.type.qtype)
    row = rng.uniform(-1, 1, (1, 1, 1, 32)).astype(np.float32)
    mem = _run(g, {a.index: blocks, b.index: row, c.index: np.array([1], np.int32).reshape(1, 1, 1, 1)})
    stored = mem.raw(a)
    np.testing.assert_array_equal(stored[0, 0, [0, 2]], blocks[0, 0, [0, 2]])  # bit for bit
    np.testing.assert_array_equal(stored[0, 0, 1], quantize(row[0, 0], a.type.qtype)[0])


def test_catalog_and_thresholds():
    names = [c.name for c in cases_of("SET_ROWS")]
    assert len(names) == len(set(names)) == 703
    assert "SET_ROWS(type_src=f16,type_dst=f16,type_idx=i32,ne=[1,8,1,3],nr23=[1,1],r=2,v=1)" in names
    p = dict(type_src="f32", type_dst="q8_0", type_idx="i32", ne=[256, 5, 1, 3], nr23=[1, 1], r=1, v=False)
    assert set_rows_max_nmse(p) == pytest.approx((1 / 64) ** 2 / (0.25 * 768), rel=1e-6)
    assert set_rows_max_nmse(dict(p, type_dst="tq2_0")) == 1e-7


def test_row_ids_are_distinct_rows_of_the_destination():
    case = Case(FAMILIES["set_rows"], dict(type_src="f32", type_dst="f16", type_idx="i64", ne=[256, 11, 1, 7],
                                           nr23=[2, 3], r=7, v=False))
    g = case.build()
    ids = case.init_inputs(g, 3)[g.leaves[2].index]
    assert ids.shape == (1, 7, 1, 7) and ids.dtype == np.int64
    assert all(len(set(row)) == 7 and row.max() < 11 for row in ids.reshape(-1, 7))


def test_sampled_cases_ok_on_ggml_cpu():
    cases = [c for c in cases_of("SET_ROWS") if c.params["type_dst"] in
             ("f32", "f16", "bf16", "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "mxfp4", "tq2_0")]
    assert_ok("GGML-CPU", sample(cases, 40))
