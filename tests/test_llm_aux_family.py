"""SOFT_MAX_BACK and LIGHTNING_INDEXER: constructors, the references against explicit
formulas on small inputs, the catalogs, and sampled cases on GGML-CPU."""
import numpy as np
import pytest

from cannops.backend.reference.indexer import lightning_indexer as ref_indexer
from cannops.backend.reference.softmax_back import soft_max_back as ref_smb
from cannops.cases import FAMILIES, Case
from cannops.cases.graph import Graph
from cannops.cases.indexer import lightning_indexer
from cannops.cases.inputs import kq_mask
from cannops.cases.softmax_back import soft_max_ext_back

from _sample import assert_ok, cases_of, sample


def test_soft_max_back_is_the_softmax_jacobian_times_dy():
    g = Graph()
    t = soft_max_ext_back(g.new_tensor("f32", [4, 2]), g.new_tensor("f32", [4, 2]), 0.5, 0.0)
    assert t.ne == (4, 2, 1, 1) and t.param_f32(0) == 0.5 and t.param_f32(1) == 0.0
    x = np.array([[0.1, -0.3, 0.7, 0.2], [1.0, 2.0, 0.0, -1.0]])
    y = np.exp(0.5 * x) / np.exp(0.5 * x).sum(-1, keepdims=True)
    dy = np.array([[1.0, 0.0, -1.0, 0.5], [0.2, 0.2, 0.2, 0.2]])
    for r in range(2):
        jac = 0.5 * (np.diag(y[r]) - np.outer(y[r], y[r]))   # d softmax(0.5 x) / dx
        np.testing.assert_allclose(ref_smb(t, dy.astype(np.float32), y.astype(np.float32))[r],
                                   jac @ dy[r], rtol=1e-6, atol=1e-7)


def test_lightning_indexer_shape_and_formula():
    g = Graph()
    q, k = g.new_tensor("f32", [3, 2, 4, 2]), g.new_tensor("f16", [3, 1, 5, 2])
    w, m = g.new_tensor("f32", [2, 4, 1, 2]), g.new_tensor("f16", [5, 4, 1, 1])
    t = lightning_indexer(q, k, w, m)
    assert t.ne == (5, 4, 1, 2) and t.type.name == "f32" and t.src == [q, k, w, m]
    with pytest.raises(AssertionError):
        lightning_indexer(q, k, w, g.new_tensor("f32", [5, 4, 1, 1]))   # the mask is f16
    rng = np.random.default_rng(1)
    qv, kv = rng.uniform(-1, 1, (2, 4, 2, 3)), rng.uniform(-1, 1, (2, 5, 1, 3))
    wv, mv = rng.uniform(-1, 1, (2, 1, 4, 2)), rng.uniform(-1, 1, (1, 1, 4, 5))
    out = ref_indexer(t, qv, kv, wv, mv)
    s, tok, j = 1, 2, 3
    expect = sum(max(qv[s, tok, h] @ kv[s, j, 0], 0.0) * wv[s, 0, tok, h] for h in range(2)) + mv[0, 0, tok, j]
    assert out[s, 0, tok, j] == pytest.approx(expect)


def test_kq_mask_has_blocks_of_minus_inf_or_zero():
    g = Graph()
    m = g.new_tensor("f16", [256, 512, 1, 4])
    data = kq_mask(m, np.random.default_rng(0))
    assert data.shape == (4, 1, 512, 256) and np.isneginf(data).any()
    finite = data[np.isfinite(data)]
    assert finite.min() >= -1 and finite.max() <= 1


def test_catalogs():
    assert len(cases_of("SOFT_MAX_BACK")) == 48 and len(cases_of("LIGHTNING_INDEXER")) == 156
    c = Case(FAMILIES["lightning_indexer"], dict(hsk=128, nh=32, kv=256, nb=1, ns=1, nm=1, type_K="f32"))
    assert c.name == "LIGHTNING_INDEXER(hsk=128,nh=32,kv=256,nb=1,ns=1,nm=1,type_K=f32)"
    assert FAMILIES["lightning_indexer"].flops(None, c.params) == (258 * 32 + 1) * 256


def test_sampled_cases_ok_on_ggml_cpu():
    smb = [c for c in cases_of("SOFT_MAX_BACK") if c.params["max_bias"] == 0.0]
    li = [c for c in cases_of("LIGHTNING_INDEXER") if c.params["nb"] * c.params["ns"] <= 128]
    assert_ok("GGML-CPU", sample(smb, 8) + sample(li, 10))
