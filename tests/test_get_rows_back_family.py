"""GET_ROWS_BACK: the constructor's shape, the reference on rows known by hand (a repeated
row id accumulates), the catalog's 58 cases, and the CPU-supported ones through ggml-CPU."""
import numpy as np
import pytest

from _sample import assert_ok, cases_of
from cannops.backend.reference.get_rows_back import get_rows_back as ref
from cannops.cases.get_rows_back import get_rows_back
from cannops.cases.graph import Graph


def test_constructor_shape_and_sources():
    g = Graph()
    grad, rows, fwd = g.new_tensor("f16", [6, 3]), g.new_tensor("i32", [3]), g.new_tensor("f16", [6, 5])
    t = get_rows_back(grad, rows, fwd)
    assert t.ne == (6, 5, 1, 1) and t.type.name == "f32" and t.src == [grad, rows]
    with pytest.raises(AssertionError):
        get_rows_back(grad, rows, g.new_tensor("f32", [7, 5]))   # rows of another length


def test_reference_sums_rows_into_their_ids():
    g = Graph()
    node = get_rows_back(g.new_tensor("f32", [2, 3]), g.new_tensor("i32", [3]), g.new_tensor("f32", [2, 4]))
    grad = np.array([[1, 2], [10, 20], [100, 200]], np.float32)
    out = ref(node, grad, np.array([2, 0, 2], np.int32))
    np.testing.assert_array_equal(out.reshape(4, 2), [[10, 20], [0, 0], [101, 202], [0, 0]])
    # a view of the first ids only uses as many grad rows
    out = ref(node, grad, np.array([3], np.int32))
    np.testing.assert_array_equal(out.reshape(4, 2), [[0, 0], [0, 0], [0, 0], [1, 2]])


def test_catalog_and_cpu():
    cases = cases_of("GET_ROWS_BACK")
    assert len(cases) == len({c.name for c in cases}) == 58
    cpu = [c for c in cases if c.params["type"] in ("f32", "f16")]   # ggml-CPU's kernels
    assert len(cpu) == 6
    assert_ok("GGML-CPU", cpu)
