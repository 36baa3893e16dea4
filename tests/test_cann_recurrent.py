"""GATED_LINEAR_ATTN, SOLVE_TRI and CROSS_ENTROPY_LOSS on CANN-SIM against the NumPy
reference; the simulator refuses what aclnnMv, aclnnTriangularSolve and
aclnnSoftmaxCrossEntropyWithLogits' documentation forbids; the other ops of these
families have no aclnn mapping."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, check_cases, nmse, rejected, run_graph  # noqa: E402
from _sample import cases_of  # noqa: E402
from cannops.backend import reference  # noqa: E402
from cannops.cases.catalog import find_deviation  # noqa: E402
from cannops.cases.graph import Graph  # noqa: E402
from cannops.cases.recurrent import gated_linear_attn  # noqa: E402
from cannops.native._aclnn import lib  # noqa: E402


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in cases_of("GATED_LINEAR_ATTN", "SOLVE_TRI", "CROSS_ENTROPY_LOSS")}


def test_catalog_cases_match_the_reference(dev, cases):
    names = ["GATED_LINEAR_ATTN(type=f32,head_count=32,head_size=64,n_seq_tokens=1,n_seqs=1)",
             "SOLVE_TRI(type=f32,ne_lhs=[10,10,4,3],ne_rhs=[3,10,4,3])",
             "SOLVE_TRI(type=f32,ne_lhs=[79,79,5,3],ne_rhs=[417,79,5,3])",
             "CROSS_ENTROPY_LOSS(type=f32,ne=[10,5,4,3])",
             "CROSS_ENTROPY_LOSS(type=f32,ne=[30000,1,1,1])"]
    assert check_cases(dev, cases, names) == 5


def test_ill_conditioned_solve_is_the_recorded_f32_deviation(dev, cases):
    """n = 128, condition numbers ~1e15: aclnnTriangularSolve solves FLOAT in f32, as
    ggml-CPU does, so it misses NMSE 1e-7; the family's CANN deviation explains it, capped."""
    c = cases["SOLVE_TRI(type=f32,ne_lhs=[128,128,4,4],ne_rhs=[32,128,4,4])"]
    g = c.build()
    inputs = c.init_inputs(g, 0)
    got = dev.run(c, g, inputs, [g.out.index]).outputs[g.out.index]
    err = nmse(got, reference.compute(g, inputs).read(g.out))
    assert err > c.family.threshold(c.params)
    assert find_deviation(c.family.notes, dev.implements, c.params, err) is not None


def test_gla_several_sequences_and_tokens(dev):
    # per (sequence, head, token) slices of k, v, q, g and of the state rows of dst
    S, H, L, B = 8, 3, 4, 2
    g = Graph()
    k, v, q, gate = (g.new_tensor("f32", [S, H, L * B], n) for n in "kvqg")
    s = g.new_tensor("f32", [S * S * H, B], "s")
    g.out = gated_linear_attn(k, v, q, gate, s, S ** -0.5)
    rng = np.random.default_rng(3)
    inputs = {t.index: rng.uniform(-1, 1, t.ne[::-1]).astype(np.float32) for t in g.leaves}
    got, ref = run_graph(dev, g, inputs)
    assert nmse(got, ref) < 1e-7


def test_other_ops_have_no_mapping(dev):
    for c in cases_of("RWKV_WKV6", "GATED_DELTA_NET", "SSM_SCAN", "OPT_STEP_SGD")[:4]:
        s = dev.supports(c, c.build())
        assert not s and "no aclnn mapping" in s.reason


def test_simulator_refuses_misuse():
    from cannops.backend.cann.sim.aclnn import OPS
    t = SimTensors()
    try:
        m, vec, out = t.tensor([4, 3], lib.ACL_FLOAT), t.tensor([4], lib.ACL_FLOAT), t.tensor([4], lib.ACL_FLOAT)
        e = rejected(OPS["Mv"], m, vec, out, 1)                     # vec must have self's 3 columns
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "vec" in str(e)
        OPS["Mv"](m, t.tensor([3], lib.ACL_FLOAT), out, 1)         # the valid call is accepted

        a, b = t.tensor([2, 5, 4], lib.ACL_FLOAT), t.tensor([2, 5, 3], lib.ACL_FLOAT)
        x, mo = t.tensor([2, 5, 3], lib.ACL_FLOAT), t.tensor([2, 5, 4], lib.ACL_FLOAT)
        assert "not square" in str(rejected(OPS["TriangularSolve"], b, a, False, False, False, x, mo))
        a64, b64 = t.tensor([5, 5], lib.ACL_DOUBLE), t.tensor([5, 3], lib.ACL_DOUBLE)
        x64, m64 = t.tensor([5, 3], lib.ACL_DOUBLE), t.tensor([5, 5], lib.ACL_DOUBLE)
        assert "unitriangular" in str(rejected(OPS["TriangularSolve"], b64, a64, False, False, True, x64, m64))
        OPS["TriangularSolve"](b64, a64, False, False, False, x64, m64)

        f, p = t.tensor([6, 10], lib.ACL_FLOAT), t.tensor([6, 10], lib.ACL_FLOAT)
        loss, bp = t.tensor([10], lib.ACL_FLOAT), t.tensor([6, 10], lib.ACL_FLOAT)
        e = rejected(OPS["SoftmaxCrossEntropyWithLogits"], f, p, loss, bp)   # one loss per row: [6]
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "loss shape" in str(e)
    finally:
        t.close()
