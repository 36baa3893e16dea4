"""MUL_MAT_ID (f32 / f16 experts, and q4_0 / q8_0 ones through aclnnWeightQuantBatchMatmulV2)
and OUT_PROD on CANN-SIM against the NumPy reference, the fused MoE / FFN cases node by node,
what the rule refuses and why, and the aclnnIndexSelect / aclnnBatchMatMul checks of the
simulator."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, check_cases, rejected  # noqa: E402
from _sample import cases_of, sample  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402

OPS = ("MUL_MAT_ID", "OUT_PROD", "MUL_MAT_ID_FUSION", "MUL_MAT_VEC_FUSION", "MUL_MAT_HADAMARD")


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in cases_of(*OPS)}


def _float_cases(cases, ops, n, limit=600_000):
    def weight_type(c):
        return c.params.get("type_a", c.params.get("type"))
    picked = [c for c in cases.values() if c.op in ops and weight_type(c) in ("f32", "f16")
              and sum(t.nelements() for t in c.build().leaves) < limit]
    return [c.name for c in sample(picked, n)]


def test_mul_mat_id_cases(dev, cases):
    names = _float_cases(cases, ("MUL_MAT_ID",), 6) + [
        # one activation row for every slot (b=1), and n_used = n_mats
        "MUL_MAT_ID(type_a=f16,type_b=f32,n_mats=16,n_used=16,b=1,m=50,n=200,k=64)",
        "MUL_MAT_ID(type_a=f32,type_b=f32,n_mats=8,n_used=4,b=1,m=512,n=5,k=256)",
    ]
    assert check_cases(dev, cases, names) == len(names)


def test_out_prod_cases(dev, cases):
    names = _float_cases(cases, ("OUT_PROD",), 8) + [
        "OUT_PROD(type_a=f16,type_b=f16,m=256,n=16,k=16,bs=[3,3],nr=[2,2],trans_b=0)",   # src0 repeated
        "OUT_PROD(type_a=f32,type_b=f32,m=256,n=16,k=16,bs=[1,1],nr=[32,1],trans_b=0)",
    ]
    assert check_cases(dev, cases, names) == len(names)


def test_fused_cases_node_by_node(dev, cases):
    names = _float_cases(cases, ("MUL_MAT_VEC_FUSION", "MUL_MAT_HADAMARD"), 6) + [
        "MUL_MAT_ID_FUSION(type_a=f16,type_b=f32,n_mats=16,n_used=16,b=0,m=32,n=32,k=32,o=3,mul=0)",
    ]
    assert check_cases(dev, cases, names) == len(names)


def test_quantized_mul_mat_id_cases(dev, cases):
    quant = [c for c in cases.values() if c.op == "MUL_MAT_ID" and c.params["type_a"] in ("q4_0", "q8_0")
             and c.params["m"] <= 512 and c.params["n"] <= 32]
    names = [c.name for c in sample(quant, 6)] + [
        # k = 3 blocks (antiquantGroupSize 32 over 96), every slot its own activation row
        "MUL_MAT_ID(type_a=q4_0,type_b=f32,n_mats=4,n_used=2,b=0,m=64,n=16,k=96)",
        "MUL_MAT_ID(type_a=q8_0,type_b=f32,n_mats=8,n_used=4,b=1,m=512,n=5,k=256)",   # one row for all
    ]
    assert check_cases(dev, cases, names) == len(names)


def _moe_node(g, type_a, k=64, m=8, n_mats=4, n_used=2, n=3, b_view=False):
    from cannops.cases.graph import view
    from cannops.cases.moe import mul_mat_id, new_ids
    as_ = g.new_tensor(type_a, [k, m, n_mats], "as")
    b = g.new_tensor("f32", [k, n_used + 1 if b_view else n_used, n], "b")
    if b_view:   # n_used of each token's n_used + 1 rows: not contiguous
        b = view(b, [k, n_used, n], [b.nb[1], b.nb[2]])
    return mul_mat_id(as_, b, new_ids(g, n_mats, n_used, n))


def test_mul_mat_id_rule_refusals(dev, cases):
    from cannops.backend.cann import rules
    from cannops.cases.graph import Graph

    def why(node):
        return rules.RULES["MUL_MAT_ID"].check(node)
    assert why(_moe_node(Graph(), "q4_0")) is None
    assert "contiguous src0 and src1" in why(_moe_node(Graph(), "q8_0", b_view=True)).reason
    assert why(_moe_node(Graph(), "f32", b_view=True)) is None      # float experts: any src1
    assert "takes m up to 65535" in why(_moe_node(Graph(), "q8_0", m=65536, n_mats=1, n_used=1)).reason
    assert "no MUL_MAT_ID for this src0 type" in why(_moe_node(Graph(), "q4_K", k=256)).reason
    c = cases["MUL_MAT_ID(type_a=bf16,type_b=f32,n_mats=16,n_used=16,b=0,m=32,n=1024,k=16)"]
    s = dev.supports(c, c.build())
    assert not s and "no MUL_MAT_ID for this src0 type" in s.reason
    c = cases["OUT_PROD(type_a=q8_0,type_b=f32,m=256,n=1,k=1,bs=[1,1],nr=[1,1],trans_b=0)"]
    assert "src0 type q8_0" in dev.supports(c, c.build()).reason


def test_documented_refusals():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    t = SimTensors()
    try:
        F32, F16, I32 = lib.ACL_FLOAT, lib.ACL_FLOAT16, lib.ACL_INT32
        # IndexSelect: a 1-D index, out of self's dtype and of the selected shape
        e = rejected(SIM["IndexSelect"], t.tensor([4, 2, 3], F32), 0, t.tensor([2, 1], I32), t.tensor([2, 2, 3], F32))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "index has 2 dims" in str(e)
        assert "should be the same" in str(rejected(SIM["IndexSelect"], t.tensor([4, 2, 3], F32), 0,
                                                    t.tensor([2], I32), t.tensor([2, 2, 3], F16)))
        assert "should be [4, 2, 2]" in str(rejected(SIM["IndexSelect"], t.tensor([4, 2, 3], F32), -1,
                                                     t.tensor([2], I32), t.tensor([2, 2, 3], F32)))
        # BatchMatMul: 3-D only, batches equal or one of them 1
        assert "has 2 dims" in str(rejected(SIM["BatchMatMul"], t.tensor([2, 3], F32), t.tensor([3, 4], F32),
                                            t.tensor([2, 4], F32), 1))
        assert "neither is 1" in str(rejected(SIM["BatchMatMul"], t.tensor([2, 1, 3], F32),
                                              t.tensor([3, 3, 4], F32), t.tensor([3, 1, 4], F32), 1))
        # a broadcast batch of 1 is accepted, and the gather reads the selected rows
        plan = SIM["BatchMatMul"](t.tensor([1, 1, 2], F32), t.tensor([3, 2, 4], F32), t.tensor([3, 1, 4], F32), 0)
        x, w = np.array([[[1, 2]]], np.float32), np.arange(24, dtype=np.float32).reshape(3, 2, 4)
        np.testing.assert_array_equal(plan.compute(x, w), x @ w)
        # WeightQuantBatchMatmulV2 on a gathered expert: a transposed weight is read, a weight
        # view that skips rows (a wrong expert stride) is neither contiguous nor a transpose
        wq = SIM["WeightQuantBatchMatmulV2"]
        x16, s16, y16 = t.tensor([1, 64], F16), t.tensor([2, 4], F16, [1, 2]), t.tensor([1, 4], F16)
        assert wq(x16, t.tensor([64, 4], lib.ACL_INT4, [1, 64]), s16, *[ffi.NULL] * 4, 32, y16).inputs
        assert "contiguous or a transpose" in str(rejected(wq, x16, t.tensor([64, 4], lib.ACL_INT8, [1, 128]),
                                                           s16, *[ffi.NULL] * 4, 32, y16))
        sel = SIM["IndexSelect"](t.tensor([4, 2], F32), 0, t.tensor([2], I32), t.tensor([2, 2], F32))
        np.testing.assert_array_equal(sel.compute(np.arange(8).reshape(4, 2), np.array([3, 1])),
                                      [[6, 7], [2, 3]])
    finally:
        t.close()
