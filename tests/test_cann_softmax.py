"""SOFT_MAX (scale, f32 / f16 masks tiled over heads, ALiBi, sinks, in place) and
TIMESTEP_EMBEDDING on CANN-SIM against the NumPy reference; the simulator refuses what
aclnnSoftmax / aclnnPowScalarTensor's docs forbid."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, check_cases, nmse, rejected, run_graph  # noqa: E402
from cannops.cases.catalog import all_cases  # noqa: E402
from cannops.cases.graph import Graph  # noqa: E402
from cannops.cases.misc import timestep_embedding  # noqa: E402
from cannops.cases.softmax import soft_max_add_sinks, soft_max_ext  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in all_cases() if c.op in ("SOFT_MAX", "TIMESTEP_EMBEDDING")}


def sm(ne, mask, sinks, m_prec, nr23, scale, max_bias, inplace):
    return (f"SOFT_MAX(type=f32,ne={ne},mask={mask},sinks={sinks},m_prec={m_prec},nr23={nr23},"
            f"scale={scale:.6f},max_bias={max_bias:.6f},inplace={inplace})")


def test_cases_match_the_reference(dev, cases):
    names = [
        sm("[15,15,1,1]", 0, 0, "f32", "[1,1]", 0.1, 0.0, 0),
        sm("[16,16,1,3]", 1, 0, "f16", "[3,1]", 1.0, 8.0, 0),     # ALiBi, mask tiled over heads
        sm("[15,15,1,1]", 1, 1, "f32", "[2,3]", 0.1, 8.0, 0),     # ... and sinks
        sm("[16,2,32,1]", 1, 0, "f16", "[1,1]", 0.1, 0.0, 1),     # in place
        sm("[32,2,32,1]", 1, 1, "f16", "[1,1]", 0.1, 8.0, 0),     # 32 heads: one slope range
        sm("[16,2,32,1]", 0, 1, "f32", "[1,1]", 0.1, 0.0, 0),
        "TIMESTEP_EMBEDDING(type=f32,ne_a=[2,1,1,1],dim=320,max_period=10000)",
    ]
    assert check_cases(dev, cases, names) == len(names)


def test_alibi_with_heads_not_a_power_of_two(dev):
    # 12 heads: 8 slopes from m0, 4 from m1 (the second aclnnArange / aclnnPowScalarTensor)
    g = Graph()
    a, m = g.new_tensor("f32", [10, 3, 12, 1], "a"), g.new_tensor("f16", [10, 4, 1, 1], "mask")
    s = g.new_tensor("f32", [12], "sinks")
    g.out = soft_max_add_sinks(soft_max_ext(a, m, 0.5, 4.0), s)
    rng = np.random.default_rng(2)
    inputs = {t.index: rng.uniform(-3, 3, tuple(reversed(t.ne))).astype(t.type.dtype) for t in g.leaves}
    got, ref = run_graph(dev, g, inputs)
    assert nmse(got, ref) < 1e-10


def test_odd_timestep_dim(dev):
    g = Graph()
    t = g.new_tensor("f32", [5], "t")
    g.out = timestep_embedding(t, 9, 100)
    ts = np.array([0.0, 1.0, 7.5, 30.0, 999.0], np.float32)
    got, ref = run_graph(dev, g, {t.index: ts})
    got = got.reshape(5, 9)
    assert np.all(got[:, 8] == 0) and np.all(got[0, :4] == 1) and nmse(got, ref.reshape(5, 9)) < 1e-10


def test_documented_refusals():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    from cannops.backend.cann.sim.acl_meta import aclCreateScalar, aclDestroyScalar
    t = SimTensors()
    base = aclCreateScalar(ffi.new("float *", 2.0), lib.ACL_FLOAT)
    try:
        x = t.tensor([4, 6], lib.ACL_FLOAT)
        e = rejected(SIM["Softmax"], x, 2, t.tensor([4, 6], lib.ACL_FLOAT))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "dim 2" in str(e)
        assert "shape" in str(rejected(SIM["Softmax"], x, 1, t.tensor([4, 5], lib.ACL_FLOAT)))
        assert "INT32" in str(rejected(SIM["Softmax"], t.tensor([4], lib.ACL_INT32), 0, t.tensor([4], lib.ACL_INT32)))
        SIM["Softmax"](x, -1, t.tensor([4, 6], lib.ACL_FLOAT16))   # cast to out's type is allowed
        # aclnnPowScalarTensor: BFLOAT16 on A2 / A3, no BOOL exponent; out has exponent's shape
        SIM["PowScalarTensor"](base, t.tensor([3], lib.ACL_BF16), t.tensor([3], lib.ACL_BF16))
        e = rejected(SIM["PowScalarTensor"], base, t.tensor([3], lib.ACL_BOOL), t.tensor([3], lib.ACL_FLOAT))
        assert "BOOL" in str(e)
        assert "shape" in str(rejected(SIM["PowScalarTensor"], base, t.tensor([3], lib.ACL_FLOAT),
                                       t.tensor([4], lib.ACL_FLOAT)))
    finally:
        aclDestroyScalar(base)
        t.close()
