"""FLASH_ATTN_EXT: the constructor (shape, op_params, sinks, prec), the reference against
explicit attention on small inputs (GQA, mask broadcast, ALiBi, softcap, sinks, fully
masked rows), the catalog (test-backend-ops' 5,141 names) and a sample on GGML-CPU."""
import math
import struct

import numpy as np
import pytest

from _sample import assert_ok, cases_of, sample
from cannops.backend.reference.flash_attn import flash_attn_ext as ref_fa
from cannops.cases.flash_attn import flash_attn_ext, flash_attn_ext_add_sinks, flash_attn_ext_set_prec
from cannops.cases.graph import Graph


def _node(q_ne, k_ne, v_ne, mask_ne=None, scale=0.5, max_bias=0.0, softcap=0.0, sinks=False):
    g = Graph()
    q, k, v = g.new_tensor("f32", q_ne), g.new_tensor("f16", k_ne), g.new_tensor("f16", v_ne)
    m = g.new_tensor("f16", mask_ne) if mask_ne else None
    t = flash_attn_ext(q, k, v, m, scale, max_bias, softcap)
    if sinks:
        flash_attn_ext_add_sinks(t, g.new_tensor("f32", [q_ne[2]]))
    return t


def test_constructor_shape_and_op_params():
    t = _node([64, 3, 8, 2], [64, 10, 2, 2], [32, 10, 2, 2], [10, 3, 1, 2], 0.125, 8.0, 10.0, sinks=True)
    assert t.ne == (32, 8, 3, 2) and t.type.name == "f32"          # {D_v, n_head, n_q, n_seq}
    assert [t.param_f32(i) for i in range(3)] == [0.125, 8.0, 10.0] and t.param_i32(3) == 0
    assert len(t.src) == 5 and t.src[4].ne[0] == 8
    flash_attn_ext_set_prec(t, "f32")
    assert t.param_i32(3) == 10 and struct.unpack_from("<f", t.op_params, 0)[0] == 0.125
    with pytest.raises(AssertionError):   # 8 query heads do not split over 3 K/V heads
        _node([64, 3, 8, 1], [64, 10, 3, 1], [64, 10, 3, 1])
    with pytest.raises(AssertionError):   # ALiBi needs a mask
        _node([64, 3, 8, 1], [64, 10, 2, 1], [64, 10, 2, 1], max_bias=8.0)


def _explicit(q, k, v, mask, scale, slopes, softcap, sinks):
    """Row by row, as the definition reads (n_seq = 1)."""
    _, nh, nq, _ = q.shape
    r = nh // k.shape[1]
    out = np.zeros((1, nq, nh, v.shape[-1]))
    for h in range(nh):
        for i in range(nq):
            s = scale * (k[0, h // r].astype(np.float64) @ q[0, h, i])
            if softcap:
                s = softcap * np.tanh(s / softcap)
            if mask is not None:
                s = s + slopes[h] * mask[0, h % mask.shape[1], i]
            logits = np.append(s, sinks[h]) if sinks is not None else s
            if np.all(np.isinf(logits)):
                continue
            w = np.exp(logits - logits.max())
            out[0, i, h] = (w[:len(s)] @ v[0, h // r].astype(np.float64)) / w.sum()
    return out


@pytest.mark.parametrize("max_bias,softcap,with_sinks", [(0.0, 0.0, False), (8.0, 0.0, True), (0.0, 5.0, True)])
def test_reference_is_attention(max_bias, softcap, with_sinks):
    rng = np.random.default_rng(3)
    nh, nkv, nq, n_kv, d = 6, 2, 3, 7, 4          # 6 heads: ALiBi's m0 for 4, m1 for 2
    t = _node([d, nq, nh, 1], [d, n_kv, nkv, 1], [5, n_kv, nkv, 1], [n_kv, nq, 1, 1], 0.7, max_bias, softcap,
              sinks=with_sinks)
    q = rng.uniform(-2, 2, (1, nh, nq, d)).astype(np.float32)
    k = rng.uniform(-2, 2, (1, nkv, n_kv, d)).astype(np.float16)
    v = rng.uniform(-1, 1, (1, nkv, n_kv, 5)).astype(np.float16)
    mask = rng.uniform(-1, 1, (1, 1, nq, n_kv)).astype(np.float16)
    mask[0, 0, 1, 2:5] = -np.inf
    mask[0, 0, 2, :] = -np.inf                      # a row with nothing to attend to
    sinks = rng.uniform(-3, 3, nh).astype(np.float32) if with_sinks else None
    m0, m1 = 2.0 ** (-max_bias / 4), 2.0 ** (-max_bias / 8)
    slopes = [m0 ** (h + 1) if h < 4 else m1 ** (2 * (h - 4) + 1) for h in range(nh)] if max_bias else [1.0] * nh
    got = ref_fa(t, q, k, v, mask, sinks)
    expect = _explicit(q, k, v, mask, 0.7, slopes, softcap, sinks)
    np.testing.assert_allclose(got, expect, rtol=2e-5, atol=1e-6)
    assert np.all(got[0, 2] == 0)


def test_catalog_matches_test_backend_ops():
    cases = cases_of("FLASH_ATTN_EXT")
    names = {c.name for c in cases}
    assert len(cases) == len(names) == 5141
    assert ("FLASH_ATTN_EXT(hsk=576,hsv=512,nh=1,nr23=[20,1],kv=512,nb=75,mask=1,sinks=0,max_bias=0.000000,"
            "logit_softcap=0.000000,prec=f32,type_K=f16,type_V=f16,permute=[0,2,1,3])") in names
    perf = cases_of("FLASH_ATTN_EXT", mode="perf")
    assert len(perf) == 19 and perf[0].params["kv"] == 5776


def test_inputs_as_test_backend_ops_makes_them():
    (case,) = [c for c in cases_of("FLASH_ATTN_EXT") if c.params == dict(
        c.params, hsk=64, nb=75, kv=512, mask=True, sinks=True, max_bias=0.0, logit_softcap=0.0,
        type_K="q8_0", permute=[0, 2, 1, 3], nr23=[1, 3])]
    g = case.build()
    data = case.init_inputs(g, 0)
    by_name = {t.name: data[t.index] for t in g.leaves if t.name}
    m, s = by_name["m"].astype(np.float32), by_name["s"]
    assert m.shape == (3, 1, 75, 512) and (np.abs(m[np.isfinite(m)]) <= 1).all()
    assert (np.isneginf(m) | (m == 0)).sum() >= 64          # 2 blocks of -inf or 0
    assert s.size == 4 and np.abs(s).max() <= 10 and np.abs(s).max() > 1
    scale = g.out.param_f32(0)
    assert scale == np.float32(1) / np.sqrt(np.float32(64)) and math.isclose(scale, 0.125)


def test_sampled_cases_on_ggml_cpu():
    small = [c for c in cases_of("FLASH_ATTN_EXT") if c.params["kv"] <= 512 and c.params["nb"] <= 32
             and "q1_0" not in (c.params["type_K"], c.params["type_V"])
             and "q2_0" not in (c.params["type_K"], c.params["type_V"])]
    assert_ok("GGML-CPU", sample(small, 24))
