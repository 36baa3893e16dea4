"""The data-movement family (cases/movement.py): case graphs, and the NumPy reference on
small inputs whose results are worked out by hand."""
import numpy as np
import pytest

from cannops.backend import reference
from cannops.backend.numpy_device import NumpyDevice
from cannops.cases import all_cases
from cannops.cases import movement as mv
from cannops.cases.graph import Graph, cast, cont, cpy, dup, permute, transpose, view

NAN = float("nan")


def run(out, inputs):
    """Compute the graph of `out` with leaf data {leaf: array of shape ne[::-1]}."""
    g = out.graph
    g.out = out
    mem = reference.compute(g, {t.index: np.asarray(v, t.type.dtype) for t, v in inputs.items()})
    return mem.read(out), mem


def leaf(g, type, values, ne):
    t = g.new_tensor(type, ne)
    return t, np.asarray(values, t.type.dtype).reshape(tuple(reversed(t.ne)))


# --- CONCAT ---

def test_concat_dim0_and_dim1():
    g = Graph()
    a, av = leaf(g, "f32", [[1, 2], [3, 4]], [2, 2])
    b, bv = leaf(g, "f32", [[5], [6]], [1, 2])
    out, _ = run(mv.concat(a, b, 0), {a: av, b: bv})
    assert out.shape == (1, 1, 2, 3)
    np.testing.assert_array_equal(out[0, 0], [[1, 2, 5], [3, 4, 6]])

    g = Graph()
    a, av = leaf(g, "i32", [[1, 2], [3, 4]], [2, 2])
    b, bv = leaf(g, "i32", [[5, 6]], [2, 1])
    out, _ = run(mv.concat(a, b, 1), {a: av, b: bv})
    np.testing.assert_array_equal(out[0, 0], [[1, 2], [3, 4], [5, 6]])


@pytest.mark.parametrize("dim", [2, 3])
def test_concat_outer_dims(dim):
    g = Graph()
    ne_b = [2, 1, 1, 1]
    ne_b[dim] = 2
    a, av = leaf(g, "f16", [7, 8], [2, 1, 1, 1])
    b, bv = leaf(g, "f16", [1, 2, 3, 4], ne_b)
    node = mv.concat(a, b, dim)
    assert node.ne[dim] == 3 and node.param_i32(0) == dim
    out, _ = run(node, {a: av, b: bv})
    # the slabs along `dim`: a's one, then b's two
    np.testing.assert_array_equal(out.reshape(3, 2), [[7, 8], [1, 2], [3, 4]])


def test_concat_of_views_reads_through_strides():
    g = Graph()
    big, bigv = leaf(g, "f32", np.arange(12), [4, 3])          # rows 0..3, 4..7, 8..11
    a = view(big, [2, 3], big.nb[1:])                           # first two of each row
    b, bv = leaf(g, "f32", [100, 101, 102], [1, 3])
    out, _ = run(mv.concat(a, b, 0), {big: bigv, b: bv})
    np.testing.assert_array_equal(out[0, 0], [[0, 1, 100], [4, 5, 101], [8, 9, 102]])


def test_quantized_concat_and_copy_move_blocks_bit_for_bit():
    from gguf.quants import quantize
    rng = np.random.default_rng(1)
    g = Graph()
    a = g.new_tensor("q8_0", [32, 2])
    b = g.new_tensor("q8_0", [64, 2])
    qa = quantize(rng.uniform(-1, 1, (2, 32)).astype(np.float32), a.type.qtype)
    qb = quantize(rng.uniform(-1, 1, (2, 64)).astype(np.float32), b.type.qtype)
    node = mv.concat(a, b, 0)
    g.out = node
    mem = reference.compute(g, {a.index: qa, b.index: qb})
    np.testing.assert_array_equal(mem.raw(node)[0, 0], np.concatenate([qa, qb], axis=1))

    # q4_0 -> q4_0 through a permuted source: blocks are moved, never requantized
    g = Graph()
    src = g.new_tensor("q4_0", [32, 2, 3, 1])
    dst = g.new_tensor("q4_0", [32, 3, 2, 1])
    qs = quantize(rng.uniform(-1, 1, (1, 3, 2, 32)).astype(np.float32), src.type.qtype)
    node = cpy(permute(src, 0, 2, 1, 3), dst)
    g.out = node
    mem = reference.compute(g, {src.index: qs, dst.index: np.zeros((1, 2, 3, 18), np.uint8)})
    np.testing.assert_array_equal(mem.raw(node)[0], qs[0].transpose(1, 0, 2))


# --- CPY / CONT / DUP ---

def test_cpy_of_a_transposed_source():
    g = Graph()
    src, sv = leaf(g, "f32", [[0, 1], [2, 3], [4, 5]], [2, 3])
    dst, dv = leaf(g, "f32", np.full(6, NAN), [3, 2])
    out, _ = run(cpy(transpose(src), dst), {src: sv, dst: dv})
    np.testing.assert_array_equal(out[0, 0], [[0, 2, 4], [1, 3, 5]])


def test_cpy_into_a_permuted_view_writes_the_viewed_tensor():
    g = Graph()
    src, sv = leaf(g, "f32", [[0, 1, 2], [3, 4, 5]], [3, 2])
    dst, dv = leaf(g, "f32", np.full(6, NAN), [2, 3])
    node = cpy(src, transpose(dst))           # logical [3, 2] view of dst's [2, 3]
    out, mem = run(node, {src: sv, dst: dv})
    np.testing.assert_array_equal(out[0, 0], [[0, 1, 2], [3, 4, 5]])
    np.testing.assert_array_equal(mem.read(dst)[0, 0], [[0, 3], [1, 4], [2, 5]])


def test_the_reference_reads_leaves_in_place_and_copies_those_it_writes():
    # one copy of each leaf: a leaf only read is the input's own memory, read-only there; a
    # leaf a node writes into (CPY's destination) gets a copy, and the input stays as it was
    g = Graph()
    src, sv = leaf(g, "f32", [[0, 1, 2], [3, 4, 5]], [3, 2])
    dst, dv = leaf(g, "f32", np.full(6, NAN), [2, 3])
    inputs = {src.index: sv, dst.index: dv}
    g.out = cpy(src, transpose(dst))
    mem = reference.compute(g, inputs)
    assert np.shares_memory(mem.buffers[src.index], sv) and not mem.buffers[src.index].flags.writeable
    assert not np.shares_memory(mem.buffers[dst.index], dv)
    np.testing.assert_array_equal(mem.read(dst)[0, 0], [[0, 3], [1, 4], [2, 5]])
    assert np.isnan(dv).all()


def test_cpy_into_a_strided_view_leaves_the_gaps_alone():
    g = Graph()
    buf, bv = leaf(g, "f16", np.full((3, 2), -7.0), [2, 3])
    src, sv = leaf(g, "f16", [1, 2, 3, 4], [2, 2])
    window = view(buf, [2, 2], buf.nb[1:], offset=buf.nb[1])  # rows 1 and 2
    mem = run(cpy(src, window), {buf: bv, src: sv})[1]
    np.testing.assert_array_equal(mem.read(buf)[0, 0], [[-7, -7], [1, 2], [3, 4]])


def test_cpy_conversions():
    g = Graph()
    src, sv = leaf(g, "f32", [-1.7, -0.5, 0.5, 2.9, 149.99, -150.0], [6])
    out, _ = run(cast(src, "i32"), {src: sv, g.tensors[1]: np.zeros(6)})
    np.testing.assert_array_equal(out.ravel(), [-1, 0, 0, 2, 149, -150])   # C cast: toward zero

    g = Graph()
    src, sv = leaf(g, "f32", [1 + 2**-8, 1 + 3 * 2**-8], [2])
    out, _ = run(cast(src, "bf16"), {src: sv, g.tensors[1]: np.zeros(2)})
    # round to nearest, ties to even: 1+2^-8 -> 1, 1+3*2^-8 -> 1+2^-6
    np.testing.assert_array_equal(out.astype(np.float32).ravel(), [1.0, 1 + 2**-6])


def test_cont_of_a_transpose_and_dup_of_a_permute():
    g = Graph()
    a, av = leaf(g, "i16", np.arange(6), [3, 2])             # [[0,1,2],[3,4,5]]
    out, _ = run(cont(transpose(a)), {a: av})
    np.testing.assert_array_equal(out[0, 0], [[0, 3], [1, 4], [2, 5]])
    g = Graph()
    a, av = leaf(g, "f32", np.arange(8), [2, 2, 2])
    out, _ = run(dup(permute(a, 1, 0, 2, 3)), {a: av})
    np.testing.assert_array_equal(out[0], np.arange(8).reshape(2, 2, 2).transpose(0, 2, 1))


# --- GET_ROWS ---

def test_get_rows_per_batch_and_through_a_view():
    g = Graph()
    a, av = leaf(g, "f16", np.arange(12), [2, 3, 2])          # 2 batches of 3 rows of 2
    rows, rv = leaf(g, "i32", [[2, 0, 1, 1], [0, 0, 2, 1]], [4, 2])
    half = view(rows, [2, 2], rows.nb[1:])                     # ids 2,0 and 0,0
    node = mv.get_rows(a, half)
    assert node.type.name == "f32" and node.ne == (2, 2, 2, 1)
    out, _ = run(node, {a: av, rows: rv})
    np.testing.assert_array_equal(out[0], [[[4, 5], [0, 1]], [[6, 7], [6, 7]]])


# --- PAD / PAD_REFLECT_1D / ROLL ---

def test_pad_zero_and_circular():
    g = Graph()
    a, av = leaf(g, "f32", [1, 2, 3], [3])
    out, _ = run(mv.pad_ext(a, 1, 2, 0, 0, 0, 0, 0, 0), {a: av})
    np.testing.assert_array_equal(out.ravel(), [0, 1, 2, 3, 0, 0])
    out, _ = run(mv.pad_ext(a, 1, 2, 0, 0, 0, 0, 0, 0, circular=True), {a: av})
    np.testing.assert_array_equal(out.ravel(), [3, 1, 2, 3, 1, 2])
    g = Graph()
    a, av = leaf(g, "f32", [[1, 2], [3, 4]], [2, 2])
    out, _ = run(mv.pad_ext(a, 0, 0, 1, 1, 0, 0, 0, 0, circular=True), {a: av})
    np.testing.assert_array_equal(out[0, 0], [[3, 4], [1, 2], [3, 4], [1, 2]])


def test_pad_reflect_1d_does_not_repeat_the_edges():
    g = Graph()
    a, av = leaf(g, "f32", [[1, 2, 3, 4, 5], [10, 20, 30, 40, 50]], [5, 2])
    out, _ = run(mv.pad_reflect_1d(a, 2, 3), {a: av})
    np.testing.assert_array_equal(out[0, 0], [[3, 2, 1, 2, 3, 4, 5, 4, 3, 2],
                                              [30, 20, 10, 20, 30, 40, 50, 40, 30, 20]])


def test_roll_shifts_toward_higher_indices():
    g = Graph()
    a, av = leaf(g, "f32", [[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], [5, 2])
    out, _ = run(mv.roll(a, 2, 0, 0, 0), {a: av})
    np.testing.assert_array_equal(out[0, 0], [[4, 5, 1, 2, 3], [9, 10, 6, 7, 8]])
    out, _ = run(mv.roll(a, -1, 1, 0, 0), {a: av})
    np.testing.assert_array_equal(out[0, 0], [[7, 8, 9, 10, 6], [2, 3, 4, 5, 1]])


# --- REPEAT / REPEAT_BACK ---

def test_repeat_and_repeat_back():
    g = Graph()
    a, av = leaf(g, "i32", [[1, 2], [3, 4]], [2, 2])
    out, _ = run(mv.repeat(a, [4, 2, 1, 2]), {a: av})
    np.testing.assert_array_equal(out[1, 0], [[1, 2, 1, 2], [3, 4, 3, 4]])
    g = Graph()
    a, av = leaf(g, "f32", [[1, 2, 3, 4], [5, 6, 7, 8]], [4, 2])
    out, _ = run(mv.repeat_back(a, [2, 1, 1, 1]), {a: av})
    np.testing.assert_array_equal(out.ravel(), [1 + 3 + 5 + 7, 2 + 4 + 6 + 8])


# --- ARANGE / FILL / TRI / DIAG / DIAG_MASK_INF ---

def test_arange_and_fill():
    g = Graph()
    node = mv.arange(g, 1.0, 2.1, 0.25)                       # ceil(1.1 / 0.25) = 5 steps
    assert node.ne == (5, 1, 1, 1) and node.src == []
    out, _ = run(node, {})
    np.testing.assert_array_equal(out.ravel(), [1.0, 1.25, 1.5, 1.75, 2.0])
    g = Graph()
    a, av = leaf(g, "f16", np.arange(6), [3, 2])
    out, _ = run(mv.fill(a, -2.5), {a: av})
    assert out.dtype == np.float16 and (out == -2.5).all()


@pytest.mark.parametrize("tri_type,expected", [
    (mv.TRI_LOWER, [[0, 0, 0], [4, 0, 0], [7, 8, 0]]),
    (mv.TRI_LOWER_DIAG, [[1, 0, 0], [4, 5, 0], [7, 8, 9]]),
    (mv.TRI_UPPER, [[0, 2, 3], [0, 0, 6], [0, 0, 0]]),
    (mv.TRI_UPPER_DIAG, [[1, 2, 3], [0, 5, 6], [0, 0, 9]]),
])
def test_tri(tri_type, expected):
    g = Graph()
    a, av = leaf(g, "f32", np.arange(1, 19), [3, 3, 2])       # rows: dim 1, cols: dim 0
    out, _ = run(mv.tri(a, tri_type), {a: av})
    np.testing.assert_array_equal(out[0, 0], expected)
    np.testing.assert_array_equal(out[0, 1], np.array(expected) + 9 * (np.array(expected) != 0))


def test_diag_and_diag_mask_inf():
    g = Graph()
    a, av = leaf(g, "f32", [[1, 2, 3], [4, 5, 6]], [3, 1, 2])
    out, _ = run(mv.diag(a), {a: av})
    np.testing.assert_array_equal(out[0, 1], [[4, 0, 0], [0, 5, 0], [0, 0, 6]])
    g = Graph()
    a, av = leaf(g, "f32", np.ones(12), [4, 3])
    out, _ = run(mv.diag_mask_inf(a, 1), {a: av})
    inf = -np.inf
    np.testing.assert_array_equal(out[0, 0], [[1, 1, inf, inf], [1, 1, 1, inf], [1, 1, 1, 1]])


# --- catalog cases through the NumPy device ---

def _case(name):
    return next(c for c in all_cases("test") if c.name == name)


def _through_numpy(case):
    g = case.build()
    dev = NumpyDevice()
    assert dev.supports(case, g)
    inputs = case.init_inputs(g, 0)
    return g, inputs, dev.run(case, g, inputs, [g.out.index]).outputs[g.out.index]


def test_cont_of_a_view_slice_case():
    # the slice starts ne1-1 *elements* into src: out[i3, i2, 0, i0] = flat[i3, i2, ne1-1+i0]
    g, inputs, out = _through_numpy(_case("CONT(type=f32,ne=[2,3,5,7],use_view_slice=1)"))
    flat = inputs[g.leaves[0].index].reshape(7, 5, 6)
    np.testing.assert_array_equal(out[:, :, 0, :], flat[:, :, 2:4])


def test_get_rows_case_row_ids_and_gather():
    g, inputs, out = _through_numpy(_case("GET_ROWS(type=f32,n=256,m=5,r=4,be1=7,be2=1,v=1)"))
    a, rows = (inputs[t.index] for t in g.leaves)
    assert rows.min() >= 0 and rows.max() < 5
    assert out.shape == (1, 7, 2, 256)
    for b in range(7):
        np.testing.assert_array_equal(out[0, b], a[0, b, rows[0, 0, b, :2]])


def test_cpy_case_thresholds_and_inputs():
    cpy = {c.name: c for c in all_cases("test") if c.op == "CPY"}
    same = cpy["CPY(type_src=f16,type_dst=f16,ne_src=[256,4,3,1],permute_src=[0,0,0,0],"
               "permute_dst=[0,0,0,0],_src_transpose=1)"]
    assert same.family.threshold(same.params) == 0.0
    q8 = cpy["CPY(type_src=f32,type_dst=q8_0,ne_src=[256,4,4,4],permute_src=[0,0,0,0],"
             "permute_dst=[0,0,0,0],_src_transpose=0)"]
    assert q8.family.threshold(q8.params) == pytest.approx((150 / 8 / 8) ** 2 / (150 * 150 * 0.25 * 256 * 4 * 4 * 4))
    g, inputs, out = _through_numpy(q8)
    src = inputs[g.leaves[0].index]
    assert np.abs(src).max() > 100                             # test_cpy's [-150, 150] range
    assert np.abs(out - src).max() <= np.abs(src).max() / 127  # one q8_0 step


def test_numpy_device_says_why_a_quantized_type_is_out_of_reach():
    # no NumPy encoder for iq2_xxs (a lattice search in ggml): a copy into it is declined
    g = Graph()
    node = cpy(g.new_tensor("f32", [256, 2]), g.new_tensor("iq2_xxs", [256, 2]))
    why = reference.unsupported(node)
    assert why and "iq2_xxs" in why and "quantizer" in why
    # q4_K is encoded by cases/quants.py; q2_K / q1_0 inputs are made by libggml /
    # cases/quants.py and decoded, so those cases run
    for name in ("CPY(type_src=f32,type_dst=q4_K,ne_src=[256,4,4,4],permute_src=[0,0,0,0],"
                 "permute_dst=[0,0,0,0],_src_transpose=0)",
                 "GET_ROWS(type=q2_K,n=256,m=5,r=4,be1=1,be2=1,v=0)",
                 "GET_ROWS(type=q1_0,n=256,m=5,r=4,be1=1,be2=1,v=0)"):
        ok = _case(name)
        assert NumpyDevice().supports(ok, ok.build())
