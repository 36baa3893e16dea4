"""ROPE on CANN-SIM (ggml-cann's sin/cos cache + aclnnRotaryPositionEmbedding) against the
NumPy reference, the rules' limits, and the simulator refusing what the operators' pages
forbid."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, check_cases, rejected  # noqa: E402
from _sample import cases_of, sample  # noqa: E402
from cannops.cases.graph import Graph  # noqa: E402
from cannops.cases.rope import NEOX, rope  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402


def test_sampled_rope_cases_match_the_reference(dev):
    rope_cases = cases_of("ROPE")
    picked = sample(rope_cases, 14)
    # each mode once with YaRN, freq factors, f16, a strided view and in place
    picked += [c for c in rope_cases if c.params["inplace"] and c.params["ff"]
               and c.params["type"] == "f16" and c.params["ne_a"][3] == 3]
    cases = {c.name: c for c in picked}
    assert check_cases(dev, cases, list(cases)) == len(cases)


def test_fused_chain_and_limits(dev):
    fused = {c.name: c for c in cases_of("RMS_NORM_MUL_ROPE")
             if not c.params["set_rows"] and c.params["ne"][0] == 768 and c.params["multi_add"]}
    assert check_cases(dev, fused, list(fused)) == len(fused)
    back = cases_of("ROPE_BACK")[0]
    assert "ROPE_BACK" in dev.supports(back, back.build()).reason
    g = Graph()
    g.out = rope(g.new_tensor("f32", [1024, 2, 3]), g.new_tensor("i32", [3]), None, 1024, NEOX)
    assert "896" in dev.supports(None, g).reason        # ggml-cann: rows of at most 896


def test_rotary_position_embedding_refusals():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    t = SimTensors()
    try:
        f32, f16 = lib.ACL_FLOAT, lib.ACL_FLOAT16
        x, c = t.tensor([1, 3, 2, 8], f32), t.tensor([1, 3, 1, 8], f32)
        SIM["RotaryPositionEmbedding"](x, c, t.tensor([1, 3, 1, 8], f32), 0, t.tensor([1, 3, 2, 8], f32))
        # mode 2 (quarter) exists on Ascend 950 only
        e = rejected(SIM["RotaryPositionEmbedding"], x, c, c, 2, t.tensor([1, 3, 2, 8], f32))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "mode" in str(e)
        # cos in another dtype than x
        e = rejected(SIM["RotaryPositionEmbedding"], x, t.tensor([1, 3, 1, 8], f16), c, 0,
                     t.tensor([1, 3, 2, 8], f32))
        assert "dtype" in str(e)
        # interleave takes cos carrying S only
        e = rejected(SIM["RotaryPositionEmbedding"], x, t.tensor([1, 3, 2, 8], f32),
                     t.tensor([1, 3, 2, 8], f32), 1, t.tensor([1, 3, 2, 8], f32))
        assert "interleave" in str(e)
        # out must be contiguous
        e = rejected(SIM["RotaryPositionEmbedding"], x, c, c, 0, t.tensor([1, 3, 2, 8], f32, [96, 32, 16, 1]))
        assert "contiguous" in str(e)
        # D < 896
        big, cb = t.tensor([1, 1, 1, 896], f32), t.tensor([1, 1, 1, 896], f32)
        e = rejected(SIM["RotaryPositionEmbedding"], big, cb, cb, 0, t.tensor([1, 1, 1, 896], f32))
        assert "896" in str(e)
        # RepeatInterleaveIntWithDim: outputSize must be the repeated length
        e = rejected(SIM["RepeatInterleaveIntWithDim"], c, 2, 3, 8, t.tensor([1, 3, 1, 16], f32))
        assert "outputSize" in str(e)
    finally:
        t.close()


def test_rotation_modes_by_hand():
    """The operator's two documented rotations on one row: half and interleave."""
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    t = SimTensors()
    try:
        f32 = lib.ACL_FLOAT
        x, c, s, y = (t.tensor([1, 1, 1, 4], f32) for _ in range(4))
        v = np.array([1, 2, 3, 4], np.float32)
        zeros = np.zeros(4, np.float32)
        for mode, expect in ((0, [-3, -4, 1, 2]), (1, [-2, 1, -4, 3])):
            plan = SIM["RotaryPositionEmbedding"](x, c, s, mode, y)
            got = plan.compute(v.reshape(1, 1, 1, 4), zeros.reshape(1, 1, 1, 4),
                               np.ones((1, 1, 1, 4), np.float32))   # cos 0, sin 1: rotate(x)
            np.testing.assert_array_equal(np.asarray(got).reshape(-1), expect)
    finally:
        t.close()
    assert ffi is not None
