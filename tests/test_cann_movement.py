"""REPEAT, REPEAT_BACK, CONCAT, GET_ROWS, PAD, PAD_REFLECT_1D, ROLL, ARANGE, FILL, TRI, DIAG
and DIAG_MASK_INF on CANN-SIM against the NumPy reference (views, permuted sources,
quantized rows, both GET_ROWS paths, circular padding in one and two passes); the
simulator refuses what the aclnn pages of Repeat / GatherV2 / ReflectionPad1d /
CircularPad2d / Cat / Tril forbid, and aclTensorList owns its tensors."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, check_cases, nmse, rejected, run_graph, sim_fixture  # noqa: E402
from cannops.backend.base import DeviceError  # noqa: E402
from cannops.backend.cann.sim.refusals import SimError  # noqa: E402
from cannops.cases import movement as M  # noqa: E402
from cannops.cases.catalog import all_cases  # noqa: E402
from cannops.cases.graph import Graph, permute  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402

OPS = ("REPEAT", "REPEAT_BACK", "CONCAT", "GET_ROWS", "PAD", "PAD_REFLECT_1D", "ROLL", "ARANGE",
       "FILL", "TRI", "DIAG", "DIAG_MASK_INF")


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in all_cases() if c.op in OPS}


SELECTED = [
    "REPEAT(type=f32,ne=[10,5,4,3],nr=[1,2,1,1])", "REPEAT(type=i16,ne=[10,5,4,3],nr=[1,1,1,2])",
    "REPEAT(type=bf16,ne=[10,5,4,1],nr=[2,1,1,1])",
    "REPEAT_BACK(type=f32,ne=[8,6,4,2],nr=[1,1,1,1],v=1)", "REPEAT_BACK(type=f32,ne=[8,6,4,2],nr=[2,1,1,1],v=1)",
    "REPEAT_BACK(type=f32,ne=[8,6,4,2],nr=[1,1,1,2],v=0)",
    "CONCAT(type=f32,ne_a=[11,12,13,14],ne_b_d=7,dim=1,v=3)", "CONCAT(type=i64,ne_a=[11,12,13,14],ne_b_d=7,dim=3,v=0)",
    "CONCAT(type=q4_0,ne_a=[128,12,13,14],ne_b_d=256,dim=0,v=12)",
    "CONCAT(type=q8_0,ne_a=[128,12,13,14],ne_b_d=7,dim=2,v=4)",
    "GET_ROWS(type=f32,n=256,m=5,r=4,be1=7,be2=1,v=1)", "GET_ROWS(type=f16,n=256,m=5,r=4,be1=7,be2=1,v=0)",
    "GET_ROWS(type=bf16,n=256,m=5,r=4,be1=1,be2=1,v=1)", "GET_ROWS(type=q8_0,n=256,m=5,r=4,be1=7,be2=1,v=1)",
    "GET_ROWS(type=i32,n=256,m=5,r=4,be1=7,be2=1,v=0)",
    "PAD(type=f32,ne_a=[100,100,1,1],pad_0=50,pad_1=50,circular=0)",
    "PAD(type=f32,ne_a=[33,17,2,1],pad_0=4,pad_1=3,circular=1)",
    "PAD(type=f32,ne_a=[11,22,33,44],lp0=1,rp0=2,lp1=3,rp1=4,lp2=5,rp2=6,lp3=7,rp3=8,tfrm=2,circular=0)",
    "PAD(type=f32,ne_a=[11,22,33,44],lp0=1,rp0=2,lp1=3,rp1=4,lp2=5,rp2=6,lp3=7,rp3=8,tfrm=1,circular=1)",
    "PAD_REFLECT_1D(type=f32,ne_a=[512,34,2,1],pad_0=10,pad_1=9)",
    "ROLL(shift0=3,shift1=-2,shift3=1,shift4=-1,permute=0)", "ROLL(shift0=3,shift1=-2,shift3=1,shift4=-1,permute=1)",
    "ARANGE(type=f32,start=0.000000,stop=10.000000,step=1.000000)",
    "FILL(type=f32,ne=[10,10,4,3],c=0.000000)", "FILL(type=f32,ne=[303,207,11,3],c=2.000000)",
    "TRI(type=f32,ne=[10,10,4,3],tri_type=0)", "TRI(type=f32,ne=[10,10,4,3],tri_type=1)",
    "TRI(type=f32,ne=[10,10,4,3],tri_type=2)", "TRI(type=f32,ne=[10,10,4,3],tri_type=3)",
    "DIAG(type=f32,ne=[79,1,19,13])",
    "DIAG_MASK_INF(type=f32,ne=[10,10,3,2],n_past=5)",
]


def test_cases_match_the_reference(dev, cases):
    assert check_cases(dev, cases, SELECTED) == len(SELECTED)


def _get_rows_graph(src_type, ne, n_idx, permuted):
    g = Graph()
    a = g.new_tensor(src_type, ne, "a")
    if permuted:   # slices no longer evenly spaced: the per-slice loop
        a = permute(a, 0, 1, 3, 2)
    rows = g.new_tensor("i32", [n_idx, a.ne[2], a.ne[3]], "rows")
    g.out = M.get_rows(a, rows)
    return g, a, rows


@pytest.mark.parametrize("type,permuted,launches", [("f16", 0, 4), ("f32", 0, 3), ("f32", 1, 60)])
def test_get_rows_of_many_slices(dev, type, permuted, launches):
    """60 slices: one batched gather from evenly spaced rows (f16 ones converted into a
    contiguous copy first), 60 launches, whose descriptors are released as they go, from
    a permuted f32 source."""
    if not cann.runtime().simulated:
        pytest.skip("counts the simulator's launches")
    from cannops.backend.cann.sim import aclnn
    g, a, rows = _get_rows_graph(type, [8, 6, 20, 3], 5, permuted)
    rng = np.random.default_rng(1)
    base = g.leaves[0]
    inputs = {base.index: rng.standard_normal(tuple(reversed(base.ne))).astype(base.type.dtype),
              rows.index: rng.integers(0, a.ne[1], tuple(reversed(rows.ne))).astype(np.int32)}
    before = len(aclnn._launched)
    got, ref = run_graph(dev, g, inputs)
    assert len(aclnn._launched) - before == launches
    assert got.shape == ref.shape == (a.ne[3], a.ne[2], 5, 8)
    np.testing.assert_array_equal(got, ref)


def test_gather_outside_the_rows_fails_cleanly(dev):
    g, a, rows = _get_rows_graph("f32", [4, 3, 1, 1], 2, 0)
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    with pytest.raises(DeviceError) as e:
        dev.run(None, g, {a.index: x, rows.index: np.array([[[0, 3]]], np.int32)}, [g.out.index])
    assert "outside self dim 0 of size 3" in str(e.value)
    got, _ = run_graph(dev, g, {a.index: x, rows.index: np.array([[[2, 0]]], np.int32)})
    np.testing.assert_array_equal(got.reshape(2, 4), x.reshape(3, 4)[[2, 0]])


def test_rules_say_why(dev, cases):
    c = cases["PAD(type=f32,ne_a=[512,512,1,1],lp0=0,rp0=1,lp1=0,rp1=1,lp2=0,rp2=0,lp3=0,rp3=0,tfrm=2,circular=1)"]
    why = dev.supports(c, c.build()).reason   # permuted: a dim of 1 padded by 1
    assert why.startswith("PAD: circular padding (aclnnCircularPad2d)")
    c = cases["GET_ROWS(type=q4_0,n=256,m=5,r=4,be1=1,be2=1,v=0)"]
    assert dev.supports(c, c.build()).reason.startswith("GET_ROWS: src0 type q4_0 not in")


# ------------------------------------------- documented-invalid aclnn calls ----

sim = sim_fixture()


def test_simulator_refuses_documented_invalid_calls(sim):
    from cannops.backend.cann.sim import ops_movement as ops
    f32, i32 = lib.ACL_FLOAT, lib.ACL_INT32
    arrays = []

    def ints(*v):
        arrays.append(sim.meta.aclCreateIntArray(ffi.new("int64_t[]", list(v)), len(v)))
        return arrays[-1]
    try:
        # ReflectionPad1d: each pad must stay below the last dim's size
        e = rejected(ops.reflection_pad1d, sim.tensor([2, 4], f32), ints(4, 0), sim.tensor([2, 8], f32))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "[0, 4)" in str(e)
        # CircularPad2d: 3-4 dims only
        e = rejected(ops.circular_pad2d, sim.tensor([4, 4], f32), ints(1, 1, 1, 1), sim.tensor([6, 6], f32))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "dims" in str(e)
        # GatherV2: index must be INT32 / INT64
        e = rejected(ops.gather_v2, sim.tensor([5, 3], f32), 0, sim.tensor([2], f32), sim.tensor([2, 3], f32))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "index dtype FLOAT" in str(e)
        # Repeat: at most 3 repeated dims when the first is not repeated (kernel limit)
        e = rejected(ops.repeat, sim.tensor([1, 2, 2, 2, 2], i32), ints(1, 2, 2, 2, 2),
                     sim.tensor([1, 4, 4, 4, 4], i32))
        assert e.code == lib.ACLNN_ERR_INNER_NULLPTR
        # Tril: 2-8 dims
        e = rejected(ops.tril, sim.tensor([6], f32), 0, sim.tensor([6], f32))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "2-8" in str(e)
        # Cat: shapes outside the concatenated dim must agree
        a, b = sim.tensor([2, 3], f32), sim.tensor([2, 4], f32)
        parts = ffi.new("aclTensor *[]", [a, b])
        lst = sim.meta.aclCreateTensorList(parts, 2)
        e = rejected(ops.cat, lst, 0, sim.tensor([4, 3], f32))
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "outside dim 0" in str(e)
        sim.meta.aclDestroyTensorList(lst)   # ... which destroys a and b too
        sim.handles = [h for h in sim.handles if h not in (a, b)]
        with pytest.raises(SimError, match="not a live aclTensor"):
            sim.meta.aclDestroyTensor(a)
    finally:
        for arr in arrays:
            sim.meta.aclDestroyIntArray(arr)


def test_tensor_lists_leave_no_leak():
    if not cann.runtime().simulated:
        pytest.skip("a real CANN device is present")
    code = textwrap.dedent("""
        from cannops.backend import cann
        from cannops.cases.catalog import all_cases
        dev = cann.open_device(cann.SIM_NAME)
        for name in ("CONCAT(type=f16,ne_a=[11,12,13,14],ne_b_d=7,dim=0,v=1)",
                     "DIAG_MASK_INF(type=f32,ne=[10,10,3,1],n_past=5)"):
            case = next(c for c in all_cases() if c.name == name)
            g = case.build()
            dev.run(case, g, case.init_inputs(g, 0), [g.out.index])
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert "leak" not in p.stderr


def test_add_refuses_a_float_alpha_on_integer_operands():
    """aclnnAdd's alpha must cast to the promoted type: FLOAT never casts to INT32 (the
    batched GET_ROWS offsets its int32 row ids with an INT32 alpha for that reason)."""
    from cannops.backend.cann.sim.aclnn import OPS
    t = SimTensors()
    i32 = t.meta.aclCreateScalar(ffi.new("int32_t *", 1), lib.ACL_INT32)
    try:
        a, b, out = (t.tensor([4, 3], lib.ACL_INT32) for _ in range(3))
        e = rejected(OPS["Add"], a, b, t.scalar_f32(1.0), out)
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "alpha" in str(e)
        OPS["Add"](a, b, i32, out)                            # an integer alpha is accepted
        f = t.tensor([4, 3], lib.ACL_FLOAT)
        OPS["Add"](f, f, t.scalar_f32(1.0), f)                # and a float one on floats
    finally:
        t.meta.aclDestroyScalar(i32)
        t.close()
