"""NORM, RMS_NORM, L2_NORM and GROUP_NORM (and the fused chains made of them) on CANN-SIM
against the NumPy reference; the simulator refuses what aclnnRmsNorm / aclnnGroupNorm /
aclnnLayerNorm's docs forbid, and the rules say why GROUP_NORM is not always possible."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, check_cases, nmse, rejected, run_graph  # noqa: E402
from cannops.cases import norm as N  # noqa: E402
from cannops.cases.catalog import all_cases  # noqa: E402
from cannops.cases.graph import Graph, permute  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402

OPS = ("NORM", "RMS_NORM", "L2_NORM", "GROUP_NORM", "RMS_NORM_MUL_ADD", "NORM_MUL_ADD",
       "ADD_RMS_NORM", "GROUP_NORM_MUL_ADD")


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in all_cases() if c.op in OPS}


def test_cases_match_the_reference(dev, cases):
    names = [
        "NORM(type=f32,ne=[64,5,4,3],v=1,eps=0.000000,noncontig_rows=0)",
        "NORM(type=f32,ne=[1025,5,4,3],v=0,eps=0.100000,noncontig_rows=1)",
        "RMS_NORM(type=f32,ne=[64,5,4,3],v=1,eps=0.000000,inplace=0)",    # strided: packed first
        "RMS_NORM(type=f32,ne=[64,5,4,3],v=0,eps=0.000001,inplace=1)",
        "L2_NORM(type=f32,ne=[64,5,4,3],eps=0.000000,v=0,noncontig_rows=1)",  # no ClampMin
        "L2_NORM(type=f32,ne=[1025,5,4,3],eps=10.000000,v=1,noncontig_rows=0)",
        "GROUP_NORM(type=f32,ne=[9,9,1280,1],num_groups=32,eps=0.000001)",
        "RMS_NORM_MUL_ADD(type=f32,ne=[64,5,4,3],eps=0.000001,broadcast=1,multi_add=0)",
        "NORM_MUL_ADD(type=f32,ne=[64,5,4,3],eps=0.100000,broadcast=1)",
        "ADD_RMS_NORM(type=f32,ne=[1025,1,1,1],eps=0.000001,broadcast=0)",
        "GROUP_NORM_MUL_ADD(type=f32,ne=[9,9,1280,1],num_groups=4,eps=0.000010)",
    ]
    assert check_cases(dev, cases, names) == len(names)


@pytest.mark.parametrize("op,type", [("NORM", "f16"), ("RMS_NORM", "bf16"), ("L2_NORM", "f16"),
                                     ("GROUP_NORM", "f16"), ("RMS_NORM", "f16")])
def test_half_types(dev, op, type):
    g = Graph()
    a = permute(g.new_tensor(type, [6, 40, 8, 1], "a"), 1, 0, 2, 3)   # rows not contiguous
    g.out = {"NORM": lambda t: N.norm(t, 1e-5), "RMS_NORM": lambda t: N.rms_norm(t, 1e-6),
             "L2_NORM": lambda t: N.l2_norm(t, 1e-3),
             "GROUP_NORM": lambda t: N.group_norm(t, 4, 1e-5)}[op](a)
    assert dev.supports(None, g)
    x = np.random.default_rng(1).uniform(-2, 2, (1, 8, 40, 6)).astype(a.type.dtype)
    got, ref = run_graph(dev, g, {a.base.index: x})
    assert got.dtype == a.type.dtype
    assert nmse(got, ref) < 1e-4, op   # one rounding to the half type


def test_uneven_groups_are_not_supported(dev):
    g = Graph()
    g.out = N.group_norm(g.new_tensor("f32", [4, 4, 30, 1], "a"), 8, 1e-6)
    why = dev.supports(None, g)
    assert not why and "divisible by n_groups" in why.reason
    g = Graph()
    g.out = N.group_norm(g.new_tensor("f32", [4, 4, 32, 1], "a"), 8, 0.0)
    assert "eps > 0" in dev.supports(None, g).reason


def test_documented_refusals():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    from cannops.backend.cann.sim.acl_meta import aclCreateIntArray, aclDestroyIntArray
    t = SimTensors()
    shape = aclCreateIntArray(ffi.new("int64_t[]", [4]), 1)
    try:
        f32 = lib.ACL_FLOAT
        # aclnnRmsNorm: a non-contiguous x is taken (the current page's 非连续Tensor column,
        # √; an older page said "不支持输入非连续", and ggml-cann passes views as they are)
        strided = t.tensor([3, 4], f32, strides=[1, 3])
        plan = SIM["RmsNorm"](strided, t.tensor([4], f32), 1e-6, t.tensor([3, 4], f32), t.tensor([3], f32))
        assert plan.inputs[0] is not None
        # rstd must be FLOAT and shaped like x's leading dims
        x = t.tensor([3, 4], f32)
        e = rejected(SIM["RmsNorm"], x, t.tensor([4], f32), 1e-6, t.tensor([3, 4], f32), t.tensor([3], lib.ACL_FLOAT16))
        assert "rstdOut" in str(e)
        SIM["RmsNorm"](x, t.tensor([4], f32), 1e-6, t.tensor([3, 4], f32), t.tensor([3], f32))
        # aclnnGroupNorm: C divisible by group, eps > 0, mean / rstd of self's type
        x = t.tensor([2, 6, 5], f32)
        stats = (t.tensor([2, 4], f32), t.tensor([2, 4], f32))
        assert "divisible" in str(rejected(SIM["GroupNorm"], x, ffi.NULL, ffi.NULL, 2, 6, 5, 4, 1e-5,
                                           t.tensor([2, 6, 5], f32), *stats))
        stats = (t.tensor([2, 3], f32), t.tensor([2, 3], f32))
        assert "eps" in str(rejected(SIM["GroupNorm"], x, ffi.NULL, ffi.NULL, 2, 6, 5, 3, 0.0,
                                     t.tensor([2, 6, 5], f32), *stats))
        e = rejected(SIM["GroupNorm"], x, ffi.NULL, ffi.NULL, 2, 6, 5, 3, 1e-5, t.tensor([2, 6, 5], f32),
                     t.tensor([2, 3], lib.ACL_FLOAT16), stats[1])
        assert "should be the same" in str(e)
        # aclnnLayerNorm: normalizedShape must match input's trailing dims
        e = rejected(SIM["LayerNorm"], t.tensor([4, 5], f32), shape, ffi.NULL, ffi.NULL, 1e-5,
                     t.tensor([4, 5], f32), ffi.NULL, ffi.NULL)
        assert "trailing" in str(e)
    finally:
        aclDestroyIntArray(shape)
        t.close()
