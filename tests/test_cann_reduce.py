"""SUM, SUM_ROWS, MEAN, ARGMAX, COUNT_EQUAL, CUMSUM and ARGSORT on CANN-SIM against the
NumPy reference (permuted and sliced sources, both sort orders, other source types); the
simulator refuses what aclnnArgsort / aclnnArgMax / aclnnReduceSum's docs forbid."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, check_cases, nmse, rejected, run_graph  # noqa: E402
from cannops.backend.base import DeviceError  # noqa: E402
from cannops.cases import reduce as R  # noqa: E402
from cannops.cases.catalog import all_cases  # noqa: E402
from cannops.cases.graph import Graph  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402

OPS = ("SUM", "SUM_ROWS", "MEAN", "ARGMAX", "COUNT_EQUAL", "CUMSUM", "ARGSORT")


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in all_cases() if c.op in OPS}


def test_cases_match_the_reference(dev, cases):
    names = [n for n, c in cases.items() if c.op == "SUM" and "1024" not in n]
    names += [n for n, c in cases.items() if c.op == "SUM_ROWS" and "[11,5,6,3]" in n]
    names += ["MEAN(type=f32,ne=[10,5,4,3])", "MEAN(type=f32,ne=[32769,1,1,1])",
              "ARGMAX(type=f32,ne=[32,513,1,1])", "ARGMAX(type=f32,ne=[5438,3,1,1])",
              "COUNT_EQUAL(type=f32,ne=[4,500,1,1])",
              "CUMSUM(type=f32,ne=[10,5,4,3])", "CUMSUM(type=f32,ne=[20481,4,1,1])",
              "ARGSORT(type=f32,ne=[16,10,10,10],order=0)", "ARGSORT(type=f32,ne=[16,10,10,10],order=1)",
              "ARGSORT(type=f32,ne=[1025,2,1,3],order=1)", "ARGSORT(type=f32,ne=[31,1,1,1],order=0)"]
    assert check_cases(dev, cases, names) == 7 + 3 + 11


@pytest.mark.parametrize("op,type", [("SUM_ROWS", "i32"), ("SUM", "f16"), ("CUMSUM", "i32"),
                                     ("ARGMAX", "f16"), ("ARGSORT", "i32"), ("MEAN", "f16")])
def test_other_source_types(dev, op, type):
    g = Graph()
    a = g.new_tensor(type, [12, 5], "a")
    fn = {"SUM_ROWS": R.sum_rows, "SUM": R.sum_all, "CUMSUM": R.cumsum, "ARGMAX": R.argmax,
          "ARGSORT": lambda t: R.argsort(t, R.SORT_DESC), "MEAN": R.mean}[op]
    if op == "CUMSUM":   # ggml_cumsum asserts f32: build the node by hand
        from cannops.cases.graph import new_op
        g.out = new_op(g, "CUMSUM", a.type, a.ne, [a])
    else:
        g.out = fn(a)
    assert dev.supports(None, g)
    rng = np.random.default_rng(3)
    x = rng.permutation(60).reshape(5, 12).astype(a.type.dtype)   # distinct: no ties to sort
    got, ref = run_graph(dev, g, {a.index: x})
    assert nmse(got, ref) < 1e-6, op


def test_count_equal_counts(dev):
    g = Graph()
    a, b = g.new_tensor("i32", [7, 3], "a"), g.new_tensor("i32", [7, 3], "b")
    g.out = R.count_equal(a, b)
    x = np.arange(21, dtype=np.int32).reshape(3, 7)
    y = x.copy()
    y[1, 2] = y[2, 6] = -1
    got, _ = run_graph(dev, g, {a.index: x, b.index: y})
    assert got.dtype == np.int64 and got.ravel().tolist() == [19]


def test_argsort_of_f64_is_refused(dev):
    g = Graph()
    a = g.new_tensor("f64", [8, 2], "a")
    g.out = R.argsort(a)
    assert "src0 type f64" in dev.supports(None, g).reason
    with pytest.raises(DeviceError) as e:   # run anyway: aclnnArgsort has no DOUBLE
        dev.run(None, g, {a.index: np.zeros((2, 8))}, [g.out.index])
    assert e.value.code == lib.ACLNN_ERR_PARAM_INVALID
    assert "aclnnArgsortGetWorkspaceSize" in str(e.value) and "DOUBLE" in str(e.value)


def test_reduction_arguments_are_checked():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    from cannops.backend.cann.sim.acl_meta import aclCreateIntArray, aclDestroyIntArray
    from cannops.backend.cann.sim.state import STATE
    t = SimTensors()
    dims = aclCreateIntArray(ffi.new("int64_t[]", [1, -1]), 2)
    try:
        x = t.tensor([3, 4], lib.ACL_FLOAT)
        e = rejected(SIM["ReduceSum"], x, dims, True, lib.ACL_FLOAT, t.tensor([3, 1], lib.ACL_FLOAT))
        assert "twice" in str(e)
        e = rejected(SIM["ArgMax"], x, 1, False, t.tensor([3], lib.ACL_FLOAT))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "FLOAT" in str(e)
        assert "out of range" in str(rejected(SIM["ArgMax"], x, 2, False, t.tensor([3], lib.ACL_INT32)))
        assert "shape" in str(rejected(SIM["ArgMax"], x, 1, True, t.tensor([3], lib.ACL_INT32)))
        SIM["ArgMax"](x, -1, True, t.tensor([3, 1], lib.ACL_INT64))
    finally:
        aclDestroyIntArray(dims)
        t.close()
    assert not STATE.int_arrays.objects


def test_argsort_orders_equal_keys_by_the_seed(dev, monkeypatch):
    """aclnnArgsort's page promises a deterministic result, not a stable one: equal keys
    come in an order CANN_SIM_SEED fixes (the process id by default), the same for the
    same seed, and always a valid sort."""
    from cannops.backend.cann.sim.state import STATE
    g = Graph()
    a = g.new_tensor("f32", [16, 3], "a")
    g.out = R.argsort(a, R.SORT_DESC)
    x = np.tile(np.array([2, 0, 1, 0], np.float32), (3, 4))   # each key 4 or 8 times a row
    orders = {}
    for seed in (1, 2, 3, 1):
        monkeypatch.setattr(STATE, "seed", seed)
        got, _ = run_graph(dev, g, {a.index: x})
        idx = got.reshape(3, 16).astype(np.int64)
        np.testing.assert_array_equal(np.take_along_axis(x, idx, 1), -np.sort(-x, 1))
        orders.setdefault(seed, idx.tolist())
        assert orders[seed] == idx.tolist()   # deterministic for one seed
    assert len({str(o) for o in orders.values()}) == 3
