"""NORM, RMS_NORM, L2_NORM, GROUP_NORM and their fused chains: constructors (shapes and
op_params as ggml packs them), the NumPy reference on hand-checkable inputs, and a few
catalog cases through the NumPy device."""
import numpy as np
import pytest

from cannops.backend.numpy_device import NumpyDevice
from cannops.backend.reference import norm as ref
from cannops.cases import FAMILIES, Case
from cannops.cases.graph import Graph
from cannops.cases.norm import group_norm, l2_norm, norm, rms_norm


def node(build, ne, *args, **kw):
    g = Graph()
    return build(g.new_tensor("f32", ne), *args, **kw)


def test_constructors_pack_op_params_as_ggml():
    for build in (norm, rms_norm, l2_norm):
        t = node(build, [8, 3, 2, 1], 1e-5)
        assert t.ne == (8, 3, 2, 1) and t.type.name == "f32" and t.is_contiguous()
        assert t.param_f32(0) == np.float32(1e-5)
    t = node(group_norm, [4, 4, 6, 1], 3, 1e-6)
    assert t.op == "GROUP_NORM" and t.param_i32(0) == 3 and t.param_f32(1) == np.float32(1e-6)


def test_inplace_rms_norm_is_a_view_of_its_input():
    g = Graph()
    a = g.new_tensor("f32", [4, 2])
    t = rms_norm(a, 1e-6, inplace=True)
    assert t.view_src is a and t.nb == a.nb and t.op == "RMS_NORM"


def test_rms_norm_of_a_constant_row_is_its_sign():
    x = np.full((1, 1, 2, 16), 3.0, np.float32)
    x[0, 0, 1] = -0.5
    out = ref.rms_norm(node(rms_norm, [16, 2], 0.0), x)
    np.testing.assert_allclose(out[0, 0, 0], 1.0, rtol=1e-12)
    np.testing.assert_allclose(out[0, 0, 1], -1.0, rtol=1e-12)
    # eps enters under the root: 3 / sqrt(9 + 16) = 0.6
    np.testing.assert_allclose(ref.rms_norm(node(rms_norm, [16, 2], 16.0), x)[0, 0, 0], 0.6)


def test_norm_by_hand():
    x = np.array([[[[1.0, 2.0, 3.0, 4.0]]]], np.float32)  # mean 2.5, variance 1.25
    out = ref.norm(node(norm, [4], 0.0), x)
    np.testing.assert_allclose(out.ravel(), (x.ravel() - 2.5) / np.sqrt(1.25))
    out = ref.norm(node(norm, [4], 0.75), x)  # sqrt(1.25 + 0.75) = sqrt(2)
    np.testing.assert_allclose(out.ravel(), (x.ravel() - 2.5) / np.sqrt(2.0))


def test_l2_norm_by_hand():
    x = np.array([[[[3.0, 4.0], [0.03, 0.04]]]], np.float32)
    out = ref.l2_norm(node(l2_norm, [2, 2], 0.1), x)
    np.testing.assert_allclose(out[0, 0, 0], [0.6, 0.8], rtol=1e-7)
    # a norm below eps divides by eps instead
    np.testing.assert_allclose(out[0, 0, 1], [0.3, 0.4], rtol=1e-6)


def test_group_norm_groups_channels_with_a_short_last_group():
    # 5 channels in 2 groups: ceil(5/2) = 3 channels, then 2
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (2, 5, 3, 4)).astype(np.float32)  # ne = [4, 3, 5, 2]
    out = ref.group_norm(node(group_norm, [4, 3, 5, 2], 2, 1e-3), x)
    for i3 in range(2):
        for chans in (slice(0, 3), slice(3, 5)):
            v = x[i3, chans].astype(np.float64)
            expect = (v - v.mean()) / np.sqrt(v.var() + 1e-3)
            np.testing.assert_allclose(out[i3, chans], expect, rtol=1e-10)


def test_group_norm_more_groups_than_needed():
    # 4 channels, 3 groups: ceil = 2 channels per group, so the third group is empty
    x = np.arange(16, dtype=np.float32).reshape(1, 4, 2, 2)
    out = ref.group_norm(node(group_norm, [2, 2, 4, 1], 3, 0.0), x)
    for chans in (slice(0, 2), slice(2, 4)):
        v = x[0, chans].astype(np.float64)
        np.testing.assert_allclose(out[0, chans], (v - v.mean()) / v.std(), rtol=1e-10)


def run_case(family, **params):
    case = Case(FAMILIES[family], params)
    g = case.build()
    inputs = case.init_inputs(g, 7)
    out = NumpyDevice().run(case, g, inputs, [g.out.index]).outputs[g.out.index]
    return case, g, {t.name: inputs[t.index] for t in g.leaves}, np.asarray(out, np.float64)


@pytest.mark.parametrize("v,nc", [(False, False), (True, False), (False, True)])
def test_norm_cases_through_numpy_device(v, nc):
    case, g, x, out = run_case("norm", type="f32", ne=[33, 5, 4, 3], v=v, eps=1e-4, noncontig_rows=nc)
    a = x["a"].astype(np.float64)
    if nc:
        a = a.swapaxes(-1, -2)  # permute(1, 0, 2, 3): the logical rows are the stored columns
    if v:
        a = a[:1, :2, :2, :16]
    assert out.shape == a.shape
    np.testing.assert_allclose(out.mean(axis=-1), 0.0, atol=1e-6)
    d = a - a.mean(axis=-1, keepdims=True)
    np.testing.assert_allclose(out, d / np.sqrt((d * d).mean(axis=-1, keepdims=True) + 1e-4), rtol=1e-5)


def test_rms_norm_inputs_span_plus_minus_ten_and_inplace_overwrites_a():
    case, g, x, out = run_case("rms_norm", type="f32", ne=[64, 5, 4, 3], v=False, eps=1e-6, inplace=True)
    a = x["a"].astype(np.float64)
    assert a.max() > 9 and a.min() < -9
    assert g.out.view_src is g.leaves[0]
    np.testing.assert_allclose(out, a / np.sqrt((a * a).mean(-1, keepdims=True) + 1e-6), rtol=1e-6)


def test_fused_rms_norm_mul_add_with_broadcast():
    case, g, x, out = run_case("rms_norm_mul_add", type="f32", ne=[8, 2, 1, 1], eps=1e-6,
                               broadcast=True, multi_add=True)
    assert g.check_nodes == [g.out] and g.out.ne == (16, 6, 3, 4)
    a, b, c = (x[n].astype(np.float32) for n in "abc")
    t = np.tile
    s = a + t(b, (4, 3, 3, 2)) + t(c, (4, 3, 3, 2))
    s = s + t(b, (4, 3, 3, 2)) + t(c, (4, 3, 3, 2))
    s = s.astype(np.float64)
    expect = s / np.sqrt((s * s).mean(-1, keepdims=True) + 1e-6) * t(b, (4, 3, 3, 2)) + t(c, (4, 3, 3, 2))
    np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-5)


def test_fused_group_norm_mul_add():
    case, g, x, out = run_case("group_norm_mul_add", type="f32", ne=[9, 9, 1280, 1], num_groups=4, eps=1e-5)
    a = x["a"][0].astype(np.float64).reshape(4, 320, 9, 9)
    m = a.mean(axis=(1, 2, 3), keepdims=True)
    n = ((a - m) / np.sqrt(a.var(axis=(1, 2, 3), keepdims=True) + 1e-5)).reshape(1, 1280, 9, 9)
    np.testing.assert_allclose(out, n * x["w"] + x["b"], rtol=1e-5, atol=1e-5)


def test_only_fused_families_are_test_mode_only():
    fused = {n for n, f in FAMILIES.items() if f.fused}
    assert {"rms_norm_mul_add", "norm_mul_add", "add_rms_norm", "group_norm_mul_add"} <= fused
    assert not {"norm", "rms_norm", "l2_norm", "group_norm"} & fused
