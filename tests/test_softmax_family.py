"""SOFT_MAX: constructor (op_params, srcs, sinks as src[2]), the NumPy reference on
hand-checkable inputs (rows sum to 1, ALiBi slopes, sinks, mask broadcast), and catalog
cases through the NumPy device."""
import numpy as np
import pytest

from cannops.backend.numpy_device import NumpyDevice
from cannops.backend.reference.softmax import alibi_slopes, soft_max as ref_soft_max
from cannops.cases import FAMILIES, Case
from cannops.cases.graph import Graph
from cannops.cases.softmax import soft_max_add_sinks, soft_max_ext


def test_constructor_packs_scale_and_max_bias_and_sinks_go_to_src2():
    g = Graph()
    a = g.new_tensor("f32", [8, 4, 3, 1])
    s = g.new_tensor("f32", [3])
    t = soft_max_add_sinks(soft_max_ext(a, None, 0.125, 0.0), s)
    assert t.param_f32(0) == 0.125 and t.param_f32(1) == 0.0
    assert t.src == [a, None, s] and t.ne == a.ne and t.is_contiguous()
    m = g.new_tensor("f16", [8, 4, 1, 1])
    t = soft_max_ext(a, m, 1.0, 8.0, inplace=True)
    assert t.src == [a, m] and t.view_src is a and t.param_f32(1) == 8.0
    with pytest.raises(AssertionError):
        soft_max_ext(a, None, 1.0, 8.0)  # ALiBi needs a mask


def node(ne, scale=1.0, max_bias=0.0, mask_ne=None, sinks=False):
    g = Graph()
    a = g.new_tensor("f32", ne)
    m = g.new_tensor("f32", mask_ne) if mask_ne else None
    t = soft_max_ext(a, m, scale, max_bias)
    return soft_max_add_sinks(t, g.new_tensor("f32", [ne[2]]) if sinks else None)


def test_rows_sum_to_one_and_follow_the_definition():
    x = np.random.default_rng(0).uniform(-5, 5, (2, 3, 4, 7)).astype(np.float32)
    out = ref_soft_max(node([7, 4, 3, 2], scale=0.5), x)
    np.testing.assert_allclose(out.sum(-1), 1.0, rtol=1e-12)
    e = np.exp(0.5 * x[0, 0, 0].astype(np.float64))
    np.testing.assert_allclose(out[0, 0, 0], e / e.sum(), rtol=1e-12)
    # no overflow for large logits
    big = ref_soft_max(node([3, 1, 1, 1]), np.array([[[[1000.0, 1000.0, -1000.0]]]], np.float32))
    np.testing.assert_allclose(big.ravel(), [0.5, 0.5, 0.0])


def test_alibi_slopes():
    # 8 heads (a power of 2), max_bias 8: 1/2, 1/4, ..., 1/256 (Press et al.)
    np.testing.assert_allclose(alibi_slopes(8, 8.0), 2.0 ** -np.arange(1, 9))
    # 12 heads: the first 8 as for 8 heads, then odd powers of 2^(-1/2)
    np.testing.assert_allclose(alibi_slopes(12, 8.0)[8:], 2.0 ** -np.array([0.5, 1.5, 2.5, 3.5]))
    np.testing.assert_allclose(alibi_slopes(5, 0.0), 1.0)


def test_mask_is_scaled_by_the_head_slope():
    # 2 heads, max_bias 2: slopes 2^-1 (n'=2: m0 = 2^(-2/2)) then 2^-2
    x = np.zeros((1, 2, 1, 2), np.float32)
    mask = np.array([[[[0.0, 4.0]]]], np.float32)
    out = ref_soft_max(node([2, 1, 2, 1], max_bias=2.0, mask_ne=[2, 1, 1, 1]), x, mask)
    for h, slope in enumerate((0.5, 0.25)):
        e = np.exp([0.0, 4.0 * slope])
        np.testing.assert_allclose(out[0, h, 0], e / e.sum())


def test_sinks_take_their_share_of_each_row():
    x = np.zeros((1, 2, 1, 2), np.float32)
    sinks = np.array([0.0, np.log(2.0)], np.float32)
    out = ref_soft_max(node([2, 1, 2, 1], sinks=True), x, None, sinks)
    np.testing.assert_allclose(out[0, 0, 0], [1 / 3, 1 / 3])   # e^0 / (1 + 1 + 1)
    np.testing.assert_allclose(out[0, 1, 0], [1 / 4, 1 / 4], rtol=1e-7)   # e^0 / (1 + 1 + 2)
    # a sink above every logit: the row max is the sink, no overflow
    out = ref_soft_max(node([2, 1, 2, 1], sinks=True), x + 500, None, np.array([1000.0, 0.0], np.float32))
    assert np.isfinite(out).all() and out[0, 0].max() < 1e-100


def run_case(**params):
    full = dict(type="f32", mask=False, sinks=False, m_prec="f32", nr23=[1, 1], scale=1.0,
                max_bias=0.0, inplace=False)
    full.update(params)
    case = Case(FAMILIES["soft_max"], full)
    g = case.build()
    inputs = case.init_inputs(g, 3)
    out = NumpyDevice().run(case, g, inputs, [g.out.index]).outputs[g.out.index]
    return g, {t.name: inputs[t.index] for t in g.leaves}, np.asarray(out, np.float64)


@pytest.mark.parametrize("m_prec", ["f32", "f16"])
def test_alibi_mask_and_sinks_case_with_broadcast_mask(m_prec):
    g, x, out = run_case(ne=[15, 15, 1, 1], mask=True, sinks=True, m_prec=m_prec, nr23=[2, 3],
                         scale=0.1, max_bias=8.0)
    a, mask, sinks = x["a"].astype(np.float64), x["mask"].astype(np.float64), x["sinks"].ravel()
    assert a.shape == (3, 2, 15, 15) and mask.shape == (1, 1, 15, 15) and sinks.shape == (2,)
    slopes = alibi_slopes(2, 8.0)
    for i3 in range(3):
        for h in range(2):
            z = a[i3, h] * 0.1 + slopes[h] * mask[0, 0]
            e = np.exp(z)
            expect = e / (e.sum(-1, keepdims=True) + np.exp(float(sinks[h])))
            np.testing.assert_allclose(out[i3, h], expect, rtol=1e-6)


def test_mask_broadcast_over_heads_tiles_the_mask():
    # 4 heads, a mask of 2: heads 0, 1, 2, 3 use mask planes 0, 1, 0, 1 (index modulo 2)
    x = np.zeros((1, 4, 1, 2), np.float32)
    mask = np.array([0.0, 1.0, 0.0, 3.0], np.float32).reshape(1, 2, 1, 2)
    out = ref_soft_max(node([2, 1, 4, 1], mask_ne=[2, 1, 2, 1]), x, mask)
    for h, top in enumerate((1.0, 3.0, 1.0, 3.0)):
        e = np.exp([0.0, top])
        np.testing.assert_allclose(out[0, h, 0], e / e.sum())


def test_inplace_case_writes_into_a():
    g, x, out = run_case(ne=[16, 2, 32, 1], mask=True, m_prec="f16", scale=0.1, inplace=True)
    assert g.out.view_src.name == "a"
    z = x["a"].astype(np.float64) * 0.1 + x["mask"].astype(np.float64)
    e = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), rtol=1e-6)


def test_soft_max_threshold_is_test_backend_ops_one():
    assert FAMILIES["soft_max"].threshold({}) == 1e-6
