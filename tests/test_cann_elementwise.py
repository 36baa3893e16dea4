"""SQR, SQRT, LOG, SIN, COS, CLAMP, LEAKY_RELU, ACC, SET and ADD_ID on CANN-SIM against the NumPy
reference; the simulator refuses what aclnnClamp / aclnnLeakyRelu's documentation forbids."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, check_cases, rejected, run_graph  # noqa: E402
from cannops.backend.base import DeviceError  # noqa: E402
from cannops.cases.binary import acc  # noqa: E402
from cannops.cases.catalog import all_cases  # noqa: E402
from cannops.cases.elementwise import leaky_relu  # noqa: E402
from cannops.cases.graph import Graph  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402

OPS = ("SQR", "SQRT", "LOG", "SIN", "COS", "CLAMP", "LEAKY_RELU", "ACC", "SET", "ADD_ID")


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in all_cases() if c.op in OPS}


def test_cases_match_the_reference(dev, cases):
    names = [n for n, c in cases.items()
             if c.op not in ("ACC", "SET", "ADD_ID") and "1024" not in n and "[7,1,5,3]" not in n]
    names += [n for n, c in cases.items() if c.op == "ACC"]                       # every view kind
    names += [n for n, c in cases.items() if c.op == "SET" and "dim=2" in n]      # f32 / i32, in place or not
    names += [n for n, c in cases.items()                                         # ids a view or whole
              if c.op == "ADD_ID" and "n_embd=129" in n and "n_token=32" in n and "n_experts=8" in n]
    assert check_cases(dev, cases, names) == 7 * 2 + 6 + 4 + 3


def test_acc_in_place_adds_into_the_region(dev):
    g = Graph()
    a, b = g.new_tensor("f32", [8, 5, 3], "a"), g.new_tensor("f32", [4, 2, 3], "b")
    g.out = acc(a, b, a.nb[1], a.nb[2], a.nb[3], offset=2 * a.nb[0] + a.nb[1], inplace=True)
    rng = np.random.default_rng(2)
    inputs = {a.index: rng.standard_normal((3, 5, 8), np.float32),
              b.index: rng.standard_normal((3, 2, 4), np.float32)}
    got, ref = run_graph(dev, g, inputs)
    np.testing.assert_array_equal(got, ref)
    assert not np.array_equal(got, inputs[a.index])


def test_leaky_relu_of_int32_is_refused(dev):
    g = Graph()
    a = g.new_tensor("i32", [8, 2], "a")
    g.out = leaky_relu(a, 0.1)
    assert not dev.supports(None, g)
    with pytest.raises(DeviceError) as e:   # run anyway: aclnnLeakyRelu's own check refuses it
        dev.run(None, g, {a.index: np.arange(16, dtype=np.int32).reshape(2, 8)}, [g.out.index])
    assert e.value.code == lib.ACLNN_ERR_PARAM_INVALID
    assert "aclnnLeakyReluGetWorkspaceSize" in str(e.value) and "INT32" in str(e.value)


def test_clamp_needs_a_bound():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    t = SimTensors()
    try:
        x, y = t.tensor([3, 4], lib.ACL_FLOAT), t.tensor([3, 4], lib.ACL_FLOAT)
        e = rejected(SIM["Clamp"], x, ffi.NULL, ffi.NULL, y)
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "both nullptr" in str(e)
        hi = t.scalar_f32(0.5)
        assert "shape" in str(rejected(SIM["Clamp"], x, ffi.NULL, hi, t.tensor([4, 3], lib.ACL_FLOAT)))
        SIM["Clamp"](x, ffi.NULL, hi, y)   # one bound is enough
    finally:
        t.close()
