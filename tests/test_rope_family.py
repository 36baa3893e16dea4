"""ROPE / ROPE_BACK / RMS_NORM_MUL_ROPE: the constructor's op_params, the reference on
hand-computed rotations, the catalog's sizes, and sampled cases on GGML-CPU."""
import math

import numpy as np
import pytest

from cannops.backend.reference.rope import positions_and_exponents, rope as ref_rope, yarn_corr_dims
from cannops.cases import all_cases
from cannops.cases.graph import Graph
from cannops.cases.rope import IMROPE, MROPE, NEOX, NORMAL, VISION, rope

from _sample import assert_ok, cases_of, sample


def _rope(ne, n_dims, mode, n_pos=None, **kw):
    g = Graph()
    a = g.new_tensor("f32", ne)
    pos = g.new_tensor("i32", [n_pos or ne[2]])
    return rope(a, pos, None, n_dims, mode, **kw)


def test_op_params_packed_as_ggml():
    t = _rope([128, 12, 2, 1], 128, MROPE, n_pos=8, n_ctx_orig=4096, freq_scale=0.5, ext_factor=0.25,
              attn_factor=2.0, beta_fast=32.0, beta_slow=1.0, sections=[42, 42, 42, 0])
    words = [t.param_i32(i) for i in range(16)]
    assert words[:5] == [0, 128, MROPE, 0, 4096] and words[11:15] == [42, 42, 42, 0] and words[15] == 0
    assert [t.param_f32(i) for i in range(5, 11)] == [10000.0, 0.5, 0.25, 2.0, 32.0, 1.0]
    # sections are dropped in plain modes; in place the result is a view of `a`
    t = _rope([8, 2, 3, 1], 8, NEOX, sections=[1, 1, 1, 0], inplace=True, back=True)
    assert [t.param_i32(i) for i in range(11, 15)] == [0, 0, 0, 0]
    assert t.op == "ROPE_BACK" and t.view_src is t.src[0] and t.ne == (8, 2, 3, 1)
    with pytest.raises(AssertionError):
        _rope([8, 2, 3, 1], 8, MROPE)  # M-RoPE needs 4 positions per token


def test_normal_and_neox_rotations_by_hand():
    x = np.arange(1, 5, dtype=np.float32).reshape(1, 1, 1, 4)
    p = 3
    # normal, n_dims 4: pairs (0,1) by p, (2,3) by p / 100 (10000^(-2/4))
    out = ref_rope(_rope([4, 1, 1, 1], 4, NORMAL), x, np.array([p]))
    t0, t1 = p, p / 100
    expect = [1 * math.cos(t0) - 2 * math.sin(t0), 1 * math.sin(t0) + 2 * math.cos(t0),
              3 * math.cos(t1) - 4 * math.sin(t1), 3 * math.sin(t1) + 4 * math.cos(t1)]
    np.testing.assert_allclose(out.reshape(-1), expect, rtol=1e-12)
    # NeoX: pairs (0,2) by p and (1,3) by p / 100
    out = ref_rope(_rope([4, 1, 1, 1], 4, NEOX), x, np.array([p]))
    expect = [1 * math.cos(t0) - 3 * math.sin(t0), 2 * math.cos(t1) - 4 * math.sin(t1),
              1 * math.sin(t0) + 3 * math.cos(t0), 2 * math.sin(t1) + 4 * math.cos(t1)]
    np.testing.assert_allclose(out.reshape(-1), expect, rtol=1e-12)
    # n_dims 2 of 4: the tail is copied
    out = ref_rope(_rope([4, 1, 1, 1], 2, NORMAL), x, np.array([p]))
    np.testing.assert_allclose(out.reshape(-1)[2:], [3, 4])


def test_back_undoes_forward_and_yarn_scales():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (1, 3, 2, 16))
    pos = np.array([5, 100, 511])
    kw = dict(freq_scale=0.75, ext_factor=0.5, beta_fast=1.0, beta_slow=1.0)
    y = ref_rope(_rope([16, 2, 3, 1], 16, NEOX, **kw), x, pos)
    back = ref_rope(_rope([16, 2, 3, 1], 16, NEOX, back=True, **kw), y, pos)
    mscale = 1 + 0.1 * math.log(1 / 0.75)  # YaRN's magnitude, once each way
    np.testing.assert_allclose(back, x * mscale ** 2, rtol=1e-12, atol=1e-12)
    # with n_ctx_orig = 0 (as the test cases) only pair 0 is in the ramp: low 0, high -inf
    assert yarn_corr_dims(16, 0, 10000.0, 1.0, 1.0) == (0.0, -math.inf)
    y_plain = ref_rope(_rope([16, 2, 3, 1], 16, NEOX, freq_scale=0.75), x, pos)
    # pair k >= 1 is interpolated (theta * freq_scale) as without YaRN, magnitude aside
    np.testing.assert_allclose(y[..., 1:8], y_plain[..., 1:8] * mscale, rtol=1e-12)
    # pair 0 mixes: theta = p * (0.75 * (1 - 0.5) + 0.5)
    th = pos * (0.75 * 0.5 + 0.5)
    np.testing.assert_allclose(y[0, :, 0, 0], mscale * (x[0, :, 0, 0] * np.cos(th) - x[0, :, 0, 8] * np.sin(th)))


def test_mrope_sections_pick_positions():
    pos = np.arange(4 * 2) * 10            # t = [0, 10], h = [20, 30], w = [40, 50], e = [60, 70]
    p, e = positions_and_exponents(MROPE, [2, 1, 1, 0], pos, 2, 6)
    assert p[1].tolist() == [10, 10, 30, 50, 10, 10]   # sectors 0 1 | 2 | 3 | (4 mod 4 = 0) ...
    assert e[1].tolist() == [0, 1, 2, 3, 4, 5]
    p, e = positions_and_exponents(IMROPE, [2, 1, 1, 0], pos, 2, 4)
    assert p[0].tolist() == [0, 20, 40, 0]             # t h w t: t while 3*2 sectors last
    p, e = positions_and_exponents(VISION, [2, 2, 0, 0], pos, 2, 4)
    assert p[0].tolist() == [0, 0, 20, 20] and e[0].tolist() == [0, 1, 0, 1]  # exponent restarts


def test_catalog_sizes():
    ops = [c.op for c in all_cases("test")]
    assert ops.count("ROPE") == 448 and ops.count("ROPE_BACK") == 388
    assert ops.count("RMS_NORM_MUL_ROPE") == 128   # test-backend-ops prints 16 of its 144 twice
    assert "RMS_NORM_MUL_ROPE" not in {c.op for c in all_cases("support")}
    assert len([c for c in all_cases("perf") if c.op.startswith("ROPE")]) == 112


def test_sampled_rope_cases_ok_on_ggml_cpu():
    assert_ok("GGML-CPU", sample(cases_of("ROPE", "ROPE_BACK"), 24))


def test_sampled_rms_norm_mul_rope_ok_on_ggml_cpu():
    # set_rows=1 chains end in SET_ROWS, whose reference and replay are SET_ROWS's family's
    fused = [c for c in cases_of("RMS_NORM_MUL_ROPE") if not c.params["set_rows"]]
    assert_ok("GGML-CPU", sample(fused, 6))


def test_rope_set_rows_writes_the_rotated_rows_at_their_ids():
    """ROPE_SET_ROWS (fused): the rope's ne2 rows land at the row ids of the cache, the other
    rows keep the cache's values; sampled cases agree with ggml-CPU."""
    from cannops.backend import reference
    from cannops.cases import Case, family

    case = Case(family("rope_set_rows"), dict(type="f32", type_idx="i64", ne_a=[128, 32, 8, 3], mode=0))
    g = case.build()
    inputs = case.init_inputs(g, 0)
    mem = reference.compute(g, inputs)
    rope_node = next(t for t in g.tensors if t.op == "ROPE")
    ids = next(inputs[t.index] for t in g.leaves if t.name == "row_idxs").reshape(-1)
    dst = next(inputs[t.index] for t in g.leaves if t.name == "dst").reshape(24, 128 * 32)
    out = mem.read(g.out).reshape(24, 128 * 32)
    rotated = mem.read(rope_node).reshape(8, 128 * 32)
    np.testing.assert_array_equal(out[ids], rotated)
    untouched = np.setdiff1d(np.arange(24), ids)
    np.testing.assert_array_equal(out[untouched], dst[untouched])
    assert_ok("GGML-CPU", sample(cases_of("ROPE_SET_ROWS"), 6))
