"""SET_ROWS on CANN-SIM against the NumPy reference (f32 / f16 / bf16 destinations, i32 and
i64 ids, tiled ids, views); the simulator refuses what aclnnInplaceIndexCopy's page forbids."""
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, rejected  # noqa: E402
from _sample import assert_ok, cases_of, sample  # noqa: E402
from cannops.native._aclnn import lib  # noqa: E402


def test_sampled_cases_ok_on_cann_sim():
    cases = [c for c in cases_of("SET_ROWS") if c.params["type_dst"] in ("f32", "f16", "bf16")]
    assert len(cases) == 126
    assert_ok("CANN-SIM", sample(cases, 30))


def test_quantized_destinations_are_not_supported(dev):
    (case,) = [c for c in cases_of("SET_ROWS") if c.name ==
               "SET_ROWS(type_src=f32,type_dst=q8_0,type_idx=i32,ne=[256,5,1,3],nr23=[1,1],r=1,v=0)"]
    assert "dst type q8_0" in dev.supports(case, case.build()).reason


def test_index_copy_arguments_are_checked():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    t = SimTensors()
    try:
        dst, rows = t.tensor([5, 8], lib.ACL_FLOAT), t.tensor([2, 8], lib.ACL_FLOAT)
        ids = t.tensor([2], lib.ACL_INT64)
        SIM["InplaceIndexCopy"](dst, 0, ids, rows)
        e = rejected(SIM["InplaceIndexCopy"], dst, 0, t.tensor([1, 2], lib.ACL_INT64), rows)
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "index has 2 dims" in str(e)
        e = rejected(SIM["InplaceIndexCopy"], dst, 0, t.tensor([2], lib.ACL_FLOAT), rows)
        assert "index dtype" in str(e)
        e = rejected(SIM["InplaceIndexCopy"], dst, 0, ids, t.tensor([2, 8], lib.ACL_FLOAT16))
        assert "should be the same" in str(e)
        e = rejected(SIM["InplaceIndexCopy"], dst, 2, ids, rows)
        assert "dim 2" in str(e)
        e = rejected(SIM["InplaceIndexCopy"], dst, 1, ids, rows)   # 2 ids but 8 rows along dim 1
        assert "source shape" in str(e)
    finally:
        t.close()
