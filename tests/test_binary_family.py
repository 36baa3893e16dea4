"""Binary family (ADD/SUB/MUL/DIV, ADD_ID, ACC, SET): the NumPy reference on small
inputs whose results are known by hand, and a few catalog cases through the NUMPY device."""
import numpy as np
import pytest

from cannops.backend import reference
from cannops.backend.numpy_device import NumpyDevice
from cannops.cases import binary as fam
from cannops.cases.catalog import FAMILIES, Case
from cannops.cases.graph import Graph, add, div, mul, permute, sub
from cannops.cases.inputs import shape_of
from _reference import run


def case(family, **params):
    c = Case(FAMILIES[family], params)
    g = c.build()
    return c, g, c.init_inputs(g, seed=1)


def leaf_by_name(g, name):
    return next(t for t in g.leaves if t.name == name)


# --- ADD / SUB / MUL / DIV ---

def test_repeat_along_rows():
    g = Graph()
    a = g.new_tensor("f32", [4, 2])
    b = g.new_tensor("f32", [2, 1])
    out = run(g, add(a, b), {a: np.zeros((2, 4)), b: [[10, 20]]})
    # b is repeated (tiled), not stretched: a[i1, i0] + b[i0 % 2]
    np.testing.assert_array_equal(out, [[[[10, 20, 10, 20], [10, 20, 10, 20]]]])


@pytest.mark.parametrize("ctor,expect", [(add, 7.0), (sub, 3.0), (mul, 10.0), (div, 2.5)])
def test_the_four_ops(ctor, expect):
    g = Graph()
    a, b = g.new_tensor("f32", [3]), g.new_tensor("f32", [1])
    np.testing.assert_array_equal(run(g, ctor(a, b), {a: [5, 5, 5], b: [2]}).ravel(), [expect] * 3)


def test_repeat_in_every_dimension():
    g = Graph()
    a = g.new_tensor("f32", [2, 3, 4, 2])
    b = g.new_tensor("f32", [1, 3, 2, 1])
    av = np.arange(48, dtype=np.float32).reshape(shape_of(a))
    bv = 100 * np.arange(6, dtype=np.float32).reshape(shape_of(b))
    out = run(g, sub(a, b), {a: av, b: bv})
    i3, i2, i1, i0 = np.indices(av.shape)
    expect = av - bv[i3 % 1, i2 % 2, i1 % 3, i0 % 1]
    np.testing.assert_array_equal(out, expect)


def test_f16_is_computed_in_f32_and_rounded_to_nearest_even():
    g = Graph()
    a, b = g.new_tensor("f16", [2]), g.new_tensor("f16", [2])
    out = run(g, add(a, b), {a: [1.0, 1.0], b: [2.0**-11, 3 * 2.0**-12]})
    assert out.dtype == np.float16
    # 1 + 2^-11 is half-way between f16 neighbours 1 and 1 + 2^-10: the even one wins
    np.testing.assert_array_equal(out.ravel(), np.array([1.0, 1.0 + 2.0**-10], np.float16))


def test_permuted_src1():
    g = Graph()
    a = g.new_tensor("f32", [2, 3, 4])
    leaf = g.new_tensor("f32", [3, 4, 2])       # ne (1, 2, 0) of a
    b = permute(leaf, 1, 2, 0, 3)
    assert b.ne == a.ne
    lv = np.arange(24, dtype=np.float32).reshape(shape_of(leaf))
    out = run(g, mul(a, b), {a: np.ones((4, 3, 2)), leaf: lv})
    # b[i2, i1, i0] = leaf[i0, i2, i1] (NumPy index order)
    np.testing.assert_array_equal(out[0], np.transpose(lv[0], (1, 2, 0)))


def test_src_overlap_reads_the_shifted_planes_of_a():
    c, g, _ = case("bin_bcast", **fam.bin_case("ADD", "f32", [2, 1, 1, 6], [1, 1, 1, 1], src_overlap=True))
    a = leaf_by_name(g, "a")
    av = np.arange(12, dtype=np.float32).reshape(shape_of(a))
    out = run(g, g.out, {a: av})
    # out = first 4 planes of a, b = planes 2..5 (ne3 / 3 = 2 planes in)
    assert out.shape == (4, 1, 1, 2)
    np.testing.assert_array_equal(out, av[:4] + av[2:6])


@pytest.mark.parametrize("inplace", [False, True])
def test_chain_of_ops(inplace):
    params = fam.bin_case("SUB", "f32", [3, 2, 1, 1], [2, 1, 1, 1], 3, inplace=inplace)
    c, g, inputs = case("bin_bcast_fused", **params)
    assert c.family.fused and g.check_nodes == [g.out]
    assert (g.out.view_src is not None) == inplace
    a = leaf_by_name(g, "a")
    bs = [leaf_by_name(g, f"b{i}") for i in range(3)]
    out = NumpyDevice().run(c, g, inputs, [g.out.index]).outputs[g.out.index]
    expect = inputs[a.index] - sum(np.tile(inputs[b.index], (1, 1, 1, 2)) for b in bs)
    np.testing.assert_allclose(out, expect, rtol=1e-6)


@pytest.mark.parametrize("op", fam.BIN_OPS)
def test_catalog_case_through_numpy_device(op):
    params = fam.bin_case(op, "f32", [10, 5, 4, 3], [2, 2, 2, 2])
    c, g, inputs = case("bin_bcast", **params)
    a, b = g.out.src
    assert a.ne == (20, 10, 8, 6) and b.ne == (10, 5, 4, 3)
    if op in ("MUL", "DIV"):  # kept away from zero, as in test-backend-ops
        assert inputs[b.index].min() >= 0.9 and inputs[b.index].max() <= 1.1
    out = NumpyDevice().run(c, g, inputs, [g.out.index]).outputs[g.out.index]
    fn = {"ADD": np.add, "SUB": np.subtract, "MUL": np.multiply, "DIV": np.divide}[op]
    np.testing.assert_array_equal(out, fn(inputs[a.index], np.tile(inputs[b.index], (2, 2, 2, 2))))


def test_names_and_modes():
    c = Case(FAMILIES["bin_bcast"], fam.bin_case("DIV", "f16", [1, 1, 8, 1], [1, 1, 1, 1], perm1=True))
    assert c.name == "DIV(type=f16,ne=[1,1,8,1],nr=[1,1,1,1],nf=1,perm1=1,src_overlap=0)"
    fused = [Case(FAMILIES["bin_bcast_fused"], p).name for p in fam.bin_bcast_fused_eval()]
    assert len(fused) == len(set(fused)) == 11
    assert FAMILIES["bin_bcast_fused"].fused and not FAMILIES["bin_bcast"].fused


# --- ADD_ID ---

def test_add_id_picks_rows_of_b():
    g = Graph()
    a = g.new_tensor("f32", [3, 2, 2])          # n_embd 3, 2 experts used, 2 tokens
    b = g.new_tensor("f32", [3, 4])             # 4 experts
    ids = g.new_tensor("i32", [2, 2])
    bv = np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3]]) * 10
    out = run(g, fam.add_id(a, b, ids), {a: np.ones((2, 2, 3)), b: bv, ids: [[3, 0], [1, 2]]})
    np.testing.assert_array_equal(out[0], [[[31] * 3, [1] * 3], [[11] * 3, [21] * 3]])


def test_add_id_case_ids_are_distinct_experts():
    c, g, inputs = case("add_id", **fam.add_id_case(32, 8, 2, 129))
    a, b, ids = g.out.src
    leaf = ids.base
    assert ids.ne[:2] == (2, 129) and leaf.ne[:2] == (8, 129)
    rows = inputs[leaf.index].reshape(129, 8)
    assert (np.sort(rows, axis=1) == np.arange(8)).all()   # each token: a permutation of experts
    out = NumpyDevice().run(c, g, inputs, [g.out.index]).outputs[g.out.index]
    used = rows[:, :2]
    expect = inputs[a.index] + inputs[b.index][0, 0][used][None]
    np.testing.assert_array_equal(out, expect)


# --- ACC ---

def test_acc_adds_into_a_window():
    g = Graph()
    a = g.new_tensor("f32", [4, 3])
    b = g.new_tensor("f32", [2, 2])
    out = fam.acc(a, b, a.nb[1], a.nb[2], a.nb[3], offset=a.nb[1] + a.nb[0])
    assert [out.param_i32(i) for i in range(5)] == [16, 48, 48, 20, 0]
    res = run(g, out, {a: np.zeros((3, 4)), b: [[1, 2], [3, 4]]})
    np.testing.assert_array_equal(res[0, 0], [[0, 0, 0, 0], [0, 1, 2, 0], [0, 3, 4, 0]])


def test_acc_case_with_offset_view_of_b():
    params = dict(type="f32", ne_a=[256, 17, 2, 3], ne_b=[128, 16, 2, 3], stride_dim=1)
    c, g, inputs = case("acc", **params)
    a, b = g.out.src
    pad = leaf_by_name(g, "b_pad")
    assert pad.ne == (128, 17, 2, 3) and b.view_offs == pad.nb[1]
    out = NumpyDevice().run(c, g, inputs, [g.out.index]).outputs[g.out.index]
    expect = inputs[a.index].copy()
    expect[:, :, :16, :128] += inputs[pad.index][:, :, 1:17, :]
    np.testing.assert_array_equal(out, expect)


# --- SET ---

def test_set_writes_a_contiguous_run_with_src_strides():
    g = Graph()
    dst = g.new_tensor("f32", [4, 4])
    src = g.new_tensor("f32", [2, 2])
    out = fam.set_region(dst, src, src.nb[1], src.nb[2], src.nb[3], offset=dst.nb[1] + dst.nb[0])
    res = run(g, out, {dst: np.zeros((4, 4)), src: [[1, 2], [3, 4]]})
    # src's own row stride (2 elements): elements 5..8 of dst, not a 2x2 block
    np.testing.assert_array_equal(res.ravel(), [0, 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("type", ["f32", "i32"])
@pytest.mark.parametrize("inplace", [False, True])
def test_set_case(type, inplace):
    c, g, inputs = case("set", type_src=type, type_dst=type, ne=[6, 5, 4, 3], dim=1, inplace=inplace)
    dst, src = g.out.src
    assert dst.ne == (12, 5, 4, 3) and g.out.param_i32(3) == 3 * dst.nb[0]
    assert (g.out.view_src is dst) == inplace
    out = NumpyDevice().run(c, g, inputs, [g.out.index]).outputs[g.out.index]
    expect = inputs[dst.index].ravel().copy()
    expect[3:3 + 360] = inputs[src.index].ravel()
    np.testing.assert_array_equal(out.ravel(), expect)


# --- against ggml (conftest.py's ggml_cpu: skipped where the bridge is not built) ---

def family_cases(*names, mode="test"):
    from cannops.cases import all_cases
    return [c for c in all_cases(mode) if c.family.name in names]


def test_every_graph_is_what_ggml_constructors_build(ggml_cpu):
    """The device replays each node through libggml's constructor and compares type, ne,
    nb, op, op_params, src and views with ours: a mismatch raises."""
    names = ("bin_bcast", "bin_bcast_fused", "add_id", "acc", "set")
    for c in family_cases(*names) + family_cases(*names, mode="perf"):
        ggml_cpu.replay(c.build()).free()


@pytest.mark.parametrize("family,params", [
    ("bin_bcast", fam.bin_case("DIV", "f16", [10, 5, 4, 3], [1, 2, 2, 2], perm1=True)),
    ("bin_bcast", fam.bin_case("SUB", "f32", [10, 5, 4, 5], [1, 1, 1, 1], src_overlap=True)),
    ("add_id", fam.add_id_case(129, 8, 4, 32)),
    ("acc", dict(type="f32", ne_a=[256, 17, 2, 3], ne_b=[64, 16, 2, 3], stride_dim=3)),
    ("set", dict(type_src="i32", type_dst="i32", ne=[6, 5, 4, 3], dim=3, inplace=True)),
])
def test_agrees_with_ggml_cpu(ggml_cpu, family, params):
    c, g, inputs = case(family, **params)
    got = ggml_cpu.run(c, g, inputs, [g.out.index])
    assert not got.problems
    ref = reference.compute(g, inputs).read(g.out).astype(np.float64)
    out = got.outputs[g.out.index].astype(np.float64)
    assert np.sum((ref - out) ** 2) / np.sum(ref ** 2) <= c.family.threshold(c.params)


def test_perf_grids():
    names = [Case(FAMILIES["bin_bcast"], p, "perf").name for p in FAMILIES["bin_bcast"].perf_grid()]
    assert names == ["ADD(type=f32,ne=[4096,1,1,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0)",
                     "ADD(type=f32,ne=[4096,1,1,1],nr=[1,512,1,1],nf=1,perm1=0,src_overlap=0)"]
    assert [len(list(FAMILIES[f].perf_grid())) for f in ("add_id", "acc", "set")] == [4, 6, 0]
    # test_bin_bcast counts 3 x nbytes(out) per run, test_set nbytes(out) + nbytes(dst)
    c, g, _ = case("bin_bcast", **fam.bin_case("ADD", "f32", [4096, 1, 1, 1], [1, 512, 1, 1]))
    assert c.family.op_size(g.out, c.params) == 3 * 4096 * 512 * 4
