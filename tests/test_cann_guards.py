"""Guard regions around every tensor the CANN backend allocates: a write past a tensor's
end (or before its start) makes the case report a sentinel mismatch naming the tensor."""
import numpy as np
import pytest

from cannops.backend.base import list_devices, open_device
from cannops.cases.catalog import all_cases

pytestmark = pytest.mark.skipif("CANN-SIM" not in [n for n, _ in list_devices()],
                                reason="CANN-SIM not available")


def _add_case():
    return next(c for c in all_cases("test") if c.op == "ADD" and "f32" in c.vars)


@pytest.mark.parametrize("where", ["after", "before"])
def test_a_write_outside_the_output_is_a_sentinel_mismatch(monkeypatch, where):
    from cannops.backend.cann import device as cann
    from cannops.native._aclnn import ffi, lib

    dev = open_device("CANN-SIM")
    case = _add_case()
    g = case.build()
    out = g.out
    real_compute = cann._Placed.compute

    def overrunning_compute(self):
        real_compute(self)
        # a kernel that writes 16 bytes just outside its output tensor
        data = ffi.cast("char *", self.structs[out.index].data)
        addr = data + out.nbytes() if where == "after" else data - 16
        junk = np.full(16, 0x5A, np.uint8)
        lib.ops_cann_upload(dev.ctx, addr, ffi.from_buffer(junk), 16, *dev._err())

    monkeypatch.setattr(cann._Placed, "compute", overrunning_compute)
    res = dev.run(case, g, case.init_inputs(g, 0), [out.index])
    assert any(p.startswith(f"sentinel mismatch: {where} ") for p in res.problems), res.problems


def test_a_clean_run_reports_no_problem():
    dev = open_device("CANN-SIM")
    case = _add_case()
    g = case.build()
    assert dev.run(case, g, case.init_inputs(g, 0), [g.out.index]).problems == []
