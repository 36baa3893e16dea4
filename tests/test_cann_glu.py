"""GLU on CANN-SIM: fused (aclnnSwiGlu / aclnnGeGluV3) and gated (activation +
aclnnInplaceMul) paths, swapped and split forms, SWIGLU_OAI, against the NumPy reference;
the simulator refuses what aclnnSwiGlu's documentation forbids."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, check_cases, nmse, rejected, run_graph  # noqa: E402
from cannops.cases.catalog import all_cases  # noqa: E402
from cannops.cases.glu import glu  # noqa: E402
from cannops.cases.graph import Graph  # noqa: E402
from cannops.native._aclnn import lib  # noqa: E402


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in all_cases() if c.op in ("REGLU", "GEGLU", "GEGLU_ERF", "GEGLU_QUICK",
                                                        "SWIGLU", "SWIGLU_OAI")}


def test_glu_cases_match_the_reference(dev, cases):
    names = []
    for op in ("REGLU", "GEGLU", "GEGLU_ERF", "GEGLU_QUICK", "SWIGLU"):
        names += [f"{op}(type=f32,ne_a=[128,2,2,2],v=0,swapped=0)",   # fused where there is a kernel
                  f"{op}(type=f16,ne_a=[128,2,2,2],v=1,swapped=1)",   # strided halves, exchanged
                  f"{op}(type=f32,ne_a=[5,7,11,13],v=0,swapped=0)",   # odd rows: gated path
                  f"{op}(type=f16,ne_a=[5,7,11,13],v=1,split)"]
    names += [n for n in cases if n.startswith("SWIGLU_OAI") and "limit=2.0" in n]
    assert check_cases(dev, cases, names) == 24


@pytest.mark.parametrize("op", ["GEGLU", "GEGLU_ERF", "SWIGLU"])
@pytest.mark.parametrize("fused", [True, False])
def test_gelu_form_is_exact_on_small_inputs(dev, op, fused):
    # on [-3, 3] the tanh and erf forms of GELU differ by an NMSE of ~4e-8: only the
    # right `approximate` (GeGluV3 / GeluV2) reaches f32 rounding level
    g = Graph()
    a = g.new_tensor("f32", [64 if fused else 63, 6, 2], "a")
    g.out = glu(a, op)
    x = np.random.default_rng(1).uniform(-3, 3, (2, 6, a.ne[0])).astype(np.float32)
    got, ref = run_graph(dev, g, {a.index: x})
    assert nmse(got, ref) < 1e-11


def test_swiglu_rejects_non_contiguous_x():
    from cannops.backend.cann.sim.aclnn import OPS
    t = SimTensors()
    try:
        x = t.tensor([4, 8], lib.ACL_FLOAT, strides=[16, 1])      # rows 16 apart: a strided view
        out = t.tensor([4, 4], lib.ACL_FLOAT)
        e = rejected(OPS["SwiGlu"], x, 1, out)
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "contiguous" in str(e)
        odd = t.tensor([4, 7], lib.ACL_FLOAT)
        assert "not even" in str(rejected(OPS["SwiGlu"], odd, -1, out))
        x = t.tensor([4, 8], lib.ACL_FLOAT)
        OPS["SwiGlu"](x, -1, out)                                  # the valid call is accepted
    finally:
        t.close()


def test_swiglu_clamp_of_0253_matches_the_reference(dev):
    """SWIGLU_CLAMP (ggml 0.25.3; its enum value follows the wheel's v0.20.2 header):
    every case, one tensor and split, f32 and f16, both limits."""
    cases = {c.name: c for c in all_cases("test", "0.25.3") if c.op == "SWIGLU_CLAMP"}
    assert check_cases(dev, cases, list(cases)) == 8


def test_swiglu_clamp_clamps_gate_above_and_value_both_sides(dev):
    """Inputs beyond the limit on each side: a gate capped only above (silu of a very
    negative gate is ~0, of a large one the limit's), the value clipped to +-limit."""
    from cannops.cases.glu import swiglu_clamp
    g = Graph("0.25.3")
    a, b = g.new_tensor("f32", [8, 1], "a"), g.new_tensor("f32", [8, 1], "b")
    g.out = swiglu_clamp(a, b, 2.0)
    x = np.array([[-30, -3, -1, 0, 1, 3, 30, 2.5]], np.float32)
    v = np.array([[5, -5, 1, 1, -1, 3, -3, 0.5]], np.float32)
    got, ref = run_graph(dev, g, {a.index: x, b.index: v})
    silu = lambda t: t / (1 + np.exp(-t))   # noqa: E731
    want = silu(np.minimum(x, 2.0)) * np.clip(v, -2.0, 2.0)
    np.testing.assert_allclose(got.reshape(-1), want.reshape(-1), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(ref.reshape(-1), want.reshape(-1), rtol=1e-6, atol=1e-7)
