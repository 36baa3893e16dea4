"""MUL_MAT: constructor shapes, the reference against explicit sums (batch broadcast by
repetition, as ggml does), permuted / strided operands and quantized A through the NumPy
device, and the catalog's case list (duplicates of test-backend-ops listed once)."""
import collections

import numpy as np
import pytest

from cannops.backend.numpy_device import NumpyDevice
from cannops.backend.reference import matmul as matmul_reference
from cannops.backend.reference.matmul import mul_mat as ref_mul_mat
from cannops.cases import FAMILIES, Case, all_cases
from cannops.cases.graph import Graph
from cannops.cases.matmul import mm, mul_mat


def test_constructor_shape_and_type():
    g = Graph()
    a = g.new_tensor("f16", [32, 5, 2, 3])
    b = g.new_tensor("f32", [32, 7, 4, 6])
    t = mul_mat(a, b)
    assert t.ne == (5, 7, 4, 6) and t.type.name == "f32" and t.src == [a, b]
    with pytest.raises(AssertionError):
        mul_mat(b, a)  # b's batch dims must be multiples of a's


@pytest.mark.parametrize("chunk", [None, 10, 20])   # a widened whole, a row of a at a time, two
def test_reference_against_explicit_sums_with_batch_repetition(chunk, monkeypatch):
    if chunk:
        monkeypatch.setattr(matmul_reference, "WIDEN_CHUNK", chunk)
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (1, 2, 3, 5)).astype(np.float32)   # ne = [k=5, m=3, 2, 1]
    b = rng.integers(-3, 4, (2, 4, 2, 5)).astype(np.float32)   # ne = [5, n=2, 4, 2]
    g = Graph()
    t = mul_mat(g.new_tensor("f32", [5, 3, 2, 1]), g.new_tensor("f32", [5, 2, 4, 2]))
    out = ref_mul_mat(t, a, b)
    assert out.shape == (2, 4, 2, 3)
    for i3 in range(2):
        for i2 in range(4):
            for j in range(2):
                for i in range(3):
                    # b matrices 0, 1 use a matrix 0; 2, 3 use a matrix 1 (i2 // 2)
                    expect = sum(float(a[0, i2 // 2, i, kk]) * float(b[i3, i2, j, kk]) for kk in range(5))
                    assert out[i3, i2, j, i] == expect


def run_case(**params):
    case = Case(FAMILIES["mul_mat_multi_out" if params.get("o", 1) > 1 else "mul_mat"], mm(**params))
    g = case.build()
    inputs = case.init_inputs(g, 5)
    mem_out = NumpyDevice().run(case, g, inputs, [g.out.index]).outputs[g.out.index]
    return g, {t.name: inputs[t.index] for t in g.leaves}, np.asarray(mem_out, np.float64)


@pytest.mark.parametrize("per", [(0, 2, 1, 3), (0, 1, 3, 2), (0, 3, 2, 1)])
def test_permuted_operands(per):
    g, x, out = run_case(type_a="f16", type_b="f32", m=16, n=8, k=32, bs=(2, 3), nr=(1, 1), per=per)
    # the leaves hold the permuted layout; permute(per) maps stored dim i to logical dim per[i]
    axes = [3 - per.index(3 - j) for j in range(4)]  # NumPy axes of ne[::-1]
    a = np.transpose(x["a"].astype(np.float64), axes)
    b = np.transpose(x["b"].astype(np.float64), axes)
    assert a.shape == (3, 2, 16, 32) and b.shape == (3, 2, 8, 32)
    np.testing.assert_allclose(out, np.einsum("xymk,xynk->xynm", a, b), rtol=1e-6)


def test_strided_rows_and_sum_of_outputs():
    # k_v = 64 > k = 32: only the first 32 elements of each row take part; o = 3 sums 3 products
    g, x, out = run_case(type_a="f32", type_b="f32", m=16, n=32, k=32, bs=(1, 1), nr=(1, 1), k_v=64, o=3)
    assert g.out.op == "ADD" and g.check_nodes == [g.out]
    a, b = x["a"][0, 0, :, :32].astype(np.float64), x["b"][0, 0, :, :32].astype(np.float64)
    np.testing.assert_allclose(out[0, 0], 3 * b @ a.T, rtol=1e-6)


def test_bf16_and_broadcast_case():
    g, x, out = run_case(type_a="bf16", type_b="f32", m=16, n=4, k=256, bs=(3, 2), nr=(2, 2))
    a, b = x["a"].astype(np.float64), x["b"].astype(np.float64)
    a = np.repeat(np.repeat(a, 2, axis=0), 2, axis=1)
    np.testing.assert_allclose(out, b @ np.swapaxes(a, -1, -2), rtol=1e-6)


@pytest.mark.parametrize("type_a", ["q4_0", "q8_0"])
def test_quantized_a_is_dequantized(type_a):
    from gguf.quants import dequantize
    from cannops.cases.types import ggml_type
    g, x, out = run_case(type_a=type_a, type_b="f32", m=16, n=3, k=256, bs=(1, 1), nr=(1, 1))
    a = dequantize(x["a"], ggml_type(type_a).qtype).astype(np.float64)
    assert a.shape == (1, 1, 16, 256)
    np.testing.assert_allclose(out, x["b"] @ np.swapaxes(a, -1, -2), rtol=1e-6)


@pytest.mark.parametrize("type_a", ["q1_0", "q2_0"])
def test_types_gguf_lacks_are_decoded_by_our_codecs(type_a):
    from cannops.cases.quants import dequantize
    from cannops.cases.types import ggml_type
    g, x, out = run_case(type_a=type_a, type_b="f32", m=16, n=3, k=256, bs=(1, 1), nr=(1, 1))
    a = dequantize(x["a"], ggml_type(type_a)).astype(np.float64)
    np.testing.assert_allclose(out, x["b"] @ np.swapaxes(a, -1, -2), rtol=1e-6)


def test_catalog_lists_each_case_once_and_flops():
    names = [c.name for c in all_cases("test") if c.op == "MUL_MAT"]
    assert len(names) == len(set(names)) == 1525
    assert sum(c.op == "MUL_MAT" for c in all_cases("support")) == 1524  # o=3 is test-only
    perf = [c for c in all_cases("perf") if c.op == "MUL_MAT"]
    c = next(c for c in perf if c.params["per"] == [0, 2, 1, 3])
    assert FAMILIES["mul_mat"].flops(None, c.params) == 2 * 16416 * 1 * 128 * 8 * 4
    types = collections.Counter(c.params["type_a"] for c in perf)
    assert len(types) == 27 and FAMILIES["mul_mat"].threshold({}) == 5e-4
