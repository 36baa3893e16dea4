"""SSM_CONV and TIMESTEP_EMBEDDING: constructors, the reference on hand-checkable inputs,
and the catalog (SSM_CONV lists exactly test-backend-ops' 45 cases)."""
import math

import numpy as np
import pytest

from cannops.backend.numpy_device import NumpyDevice
from cannops.backend.reference.misc import ssm_conv as ref_ssm_conv
from cannops.backend.reference.misc import timestep_embedding as ref_timestep
from cannops.cases import FAMILIES, Case, all_cases
from cannops.cases.graph import Graph
from cannops.cases.misc import ssm_conv, timestep_embedding


def test_ssm_conv_shape_and_sliding_dot_product():
    g = Graph()
    t = ssm_conv(g.new_tensor("f32", [6, 2, 3]), g.new_tensor("f32", [3, 2]))
    assert t.ne == (2, 4, 3, 1) and t.type.name == "f32"  # {d_inner, n_t = 6 - 3 + 1, n_s}
    with pytest.raises(AssertionError):
        ssm_conv(g.new_tensor("f32", [6, 5, 3]), g.new_tensor("f32", [3, 2]))  # d_inner differs
    sx = np.arange(36, dtype=np.float32).reshape(1, 3, 2, 6)
    c = np.array([[1.0, 0.0, -1.0], [0.5, 0.5, 0.5]], np.float32).reshape(1, 1, 2, 3)
    out = ref_ssm_conv(t, sx, c)
    assert out.shape == (3, 4, 2)
    # channel 0: x[t] - x[t+2] = -2 everywhere; channel 1: mean-of-3 times 1.5
    np.testing.assert_allclose(out[:, :, 0], -2.0)
    for s in range(3):
        for tok in range(4):
            np.testing.assert_allclose(out[s, tok, 1], 0.5 * sx[0, s, 1, tok:tok + 3].sum())


def test_ssm_conv_catalog_is_the_45_reference_cases():
    names = [c.name for c in all_cases("test") if c.op == "SSM_CONV"]
    assert len(set(names)) == 45
    assert "SSM_CONV(type=f32,ne_a=[66,1024,4,1],ne_b=[3,1024,1,1])" in names


def test_ssm_conv_case_through_numpy_device():
    case = Case(FAMILIES["ssm_conv"], dict(type="f32", ne_a=[66, 1024, 4, 1], ne_b=[3, 1024, 1, 1]))
    g = case.build()
    inputs = case.init_inputs(g, 1)
    out = NumpyDevice().run(case, g, inputs, [g.out.index]).outputs[g.out.index]
    sx = inputs[g.leaves[0].index][0].astype(np.float64)   # (n_s, d_inner, 66)
    c = inputs[g.leaves[1].index][0, 0].astype(np.float64)  # (d_inner, 3)
    expect = sum(sx[:, :, i:i + 64] * c[None, :, i:i + 1] for i in range(3))  # (n_s, d_inner, n_t)
    np.testing.assert_allclose(out[0], expect.transpose(0, 2, 1), rtol=1e-5, atol=1e-6)


def test_timestep_embedding_by_hand():
    g = Graph()
    t = timestep_embedding(g.new_tensor("f32", [2]), 4, 10000)
    assert t.ne == (4, 2, 1, 1) and t.param_i32(0) == 4 and t.param_i32(1) == 10000
    out = ref_timestep(t, np.array([0.0, 1.0], np.float32))
    # half = 2, frequencies 1 and 10000^(-1/2) = 0.01
    np.testing.assert_allclose(out[0], [1, 1, 0, 0])
    np.testing.assert_allclose(out[1], [math.cos(1), math.cos(0.01), math.sin(1), math.sin(0.01)])
    odd = ref_timestep(timestep_embedding(g.new_tensor("f32", [2]), 5, 10000), np.array([0.0, 1.0], np.float32))
    assert odd.shape == (2, 5) and (odd[:, 4] == 0).all()


def test_timestep_embedding_case():
    (case,) = [c for c in all_cases("test") if c.op == "TIMESTEP_EMBEDDING"]
    assert case.name == "TIMESTEP_EMBEDDING(type=f32,ne_a=[2,1,1,1],dim=320,max_period=10000)"
    g = case.build()
    inputs = case.init_inputs(g, 1)
    out = NumpyDevice().run(case, g, inputs, [g.out.index]).outputs[g.out.index]
    assert out.shape == (1, 1, 2, 320)
    np.testing.assert_allclose(out[0, 0, :, :160] ** 2 + out[0, 0, :, 160:] ** 2, 1.0, rtol=1e-6)
