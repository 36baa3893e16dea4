"""The unary / element-wise / GLU families: constructors (shapes, op_params as ggml packs
them) and the NumPy reference on small inputs whose outputs are known by hand."""
import functools
import math

import numpy as np
import pytest

from cannops.backend import reference
from cannops.backend.numpy_device import NumpyDevice
from cannops.cases import FAMILIES, Case, all_cases
from cannops.cases.elementwise import clamp, cos, leaky_relu, log, scale_inplace, sin, sqr, sqrt
from cannops.cases.glu import glu, glu_split, swiglu_oai
from cannops.cases.graph import Graph, scale, unary
from cannops.cases.unary import xielu, xielu_args


def run(out, *arrays):
    """Compute `out` of its graph from the leaves' values (given in creation order)."""
    g = out.graph
    g.out = out
    leaves = g.leaves
    inputs = {t.index: np.asarray(a, dtype=t.type.dtype).reshape(tuple(reversed(t.ne)))
              for t, a in zip(leaves, arrays)}
    mem = reference.compute(g, inputs)
    return np.asarray(mem.read(out), dtype=np.float64).ravel()


def leaf(values, type="f32", ne=None):
    g = Graph()
    values = np.asarray(values, dtype=np.float32)
    return g.new_tensor(type, ne or [values.size]), values


@pytest.mark.parametrize("op,x,want", [
    ("RELU", [-1, 0, 2], [0, 0, 2]),
    ("STEP", [-1, 0, 3], [0, 0, 1]),
    ("SGN", [-4, 0, 3], [-1, 0, 1]),
    ("ABS", [-4, 0, 3], [4, 0, 3]),
    ("HARDSIGMOID", [-4, 0, 3], [0, 0.5, 1]),
    ("HARDSWISH", [-4, 0, 3], [0, 0, 3]),
    ("FLOOR", [-1.5, 1.5, 2], [-2, 1, 2]),
    ("CEIL", [-1.5, 1.5, 2], [-1, 2, 2]),
    ("TRUNC", [-1.5, 1.5, 2.7], [-1, 1, 2]),
    # halfway cases away from zero; the float just below 0.5 and 2^23 + 1 stay put
    ("ROUND", [2.5, -2.5, 0.5, 0.49999997, 8388609.0, -1.4], [3, -3, 1, 0, 8388609, -1]),
    ("ELU", [-math.log(2), 2], [-0.5, 2]),
    ("SIGMOID", [0, math.log(3)], [0.5, 0.75]),
    ("SILU", [0, math.log(3)], [0, 0.75 * math.log(3)]),
    ("SOFTPLUS", [0, 30], [math.log(2), 30]),
    ("EXPM1", [0, math.log(2)], [0, 1]),
])
def test_unary_known_values(op, x, want):
    a, x = leaf(x)
    assert run(unary(a, op), x) == pytest.approx(want, rel=1e-6, abs=1e-7)


def test_gelu_erf_matches_math_erf():
    xs = np.linspace(-7, 7, 1001)
    a, x = leaf(xs)
    want = [0.5 * v * (1 + math.erf(v / math.sqrt(2))) for v in x.astype(np.float64)]
    assert run(unary(a, "GELU_ERF"), x) == pytest.approx(want, rel=1e-6, abs=1e-7)


def test_f16_output_is_rounded_once():
    # sqrt(2) in f32, then one rounding to f16
    a, x = leaf([2.0, 3.0], "f16")
    assert list(run(sqrt(a), x)) == [float(np.float16(np.sqrt(np.float32(v)))) for v in (2, 3)]


def test_xielu_params_and_values():
    a, x = leaf([1.0, 0.0, -1.0, -30.0])
    out = xielu(a, 4.0, 20.0, 0.5, 1e-7)
    softplus4 = math.log1p(math.exp(4.0))
    assert out.param_i32(0) == 17  # GGML_UNARY_OP_XIELU
    assert [out.param_f32(i) for i in range(1, 5)] == pytest.approx(
        [0.5 + softplus4, 20.0, 0.5, 1e-7], rel=1e-6)
    an = 0.5 + softplus4
    want = [20.0 + 0.5,                               # alpha_p x^2 + beta x
            0.0,
            (math.expm1(-1.0) + 1.0) * an - 0.5,      # (expm1(x) - x) alpha_n + beta x
            (math.expm1(-30.0) + 30.0) * an - 15.0]
    assert run(out, x) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("alpha_n,alpha_p", [(4.0, 20.0), (0.3, 1.7), (-1.3, 25.0)])
def test_xielu_args_repack_to_the_same_op_params(alpha_n, alpha_p):
    # replays call ggml_xielu with the arguments recovered from the packed op_params
    a, _ = leaf([0.0])
    t = xielu(a, alpha_n, alpha_p, 0.5, 1e-7)
    args = xielu_args(t)
    assert args[0] == pytest.approx(alpha_n, rel=1e-6) and args[1] == pytest.approx(alpha_p, rel=1e-6)
    b, _ = leaf([0.0])
    assert bytes(xielu(b, *args).op_params) == bytes(t.op_params)


def test_elementwise_ops():
    xs = [0.25, 1.0, 4.0]
    for fn, want in ((sqr, [0.0625, 1, 16]), (sqrt, [0.5, 1, 2]), (log, [math.log(.25), 0, math.log(4)]),
                     (sin, [math.sin(v) for v in xs]), (cos, [math.cos(v) for v in xs])):
        a, x = leaf(xs)
        assert run(fn(a), x) == pytest.approx(want, rel=1e-6), fn.__name__


def test_clamp_and_leaky_relu_work_in_place():
    a, x = leaf([-2.0, -0.25, 0.75, 3.0])
    out = clamp(a, -0.5, 0.5)
    assert out.view_src is a and out.op == "CLAMP"
    assert [out.param_f32(0), out.param_f32(1)] == [-0.5, 0.5]
    g = out.graph
    g.out = out
    mem = reference.compute(g, {a.index: x})
    assert list(mem.read(a).ravel()) == [-0.5, -0.25, 0.5, 0.5]  # a itself was overwritten

    a, x = leaf([-2.0, 0.0, 3.0])
    out = leaky_relu(a, 0.1, inplace=True)
    assert out.view_src is a and out.param_f32(0) == pytest.approx(0.1)
    assert run(out, x) == pytest.approx([-0.2, 0.0, 3.0])


def test_scale_bias_and_inplace_scale():
    a, x = leaf([1.0, -2.0])
    assert run(scale(a, 2.0, 1.0), x) == pytest.approx([3.0, -3.0])
    a, x = leaf([1.0, -2.0])
    out = scale_inplace(a, 3.0)
    assert out.view_src is a
    assert run(out, x) == pytest.approx([3.0, -6.0])


def test_glu_halves_and_swap():
    # one row [x0 x1 | g0 g1]: REGLU = relu(x) * g; swapped uses the halves the other way
    row = [-1.0, 2.0, 5.0, 7.0]
    a, x = leaf(row, ne=[4, 1])
    out = glu(a, "REGLU")
    assert out.ne == (2, 1, 1, 1) and out.param_i32(0) == 0 and out.param_i32(1) == 0
    assert run(out, x) == pytest.approx([0.0, 14.0])
    a, x = leaf(row, ne=[4, 1])
    out = glu(a, "REGLU", swapped=True)
    assert out.param_i32(1) == 1
    assert run(out, x) == pytest.approx([-5.0, 14.0])


def test_glu_odd_row_ignores_last_element_and_rows_are_independent():
    a, x = leaf([1, 2, 3, 4, 99, -1, -2, 10, 10, 99], ne=[5, 2])
    out = glu(a, "REGLU")
    assert out.ne[:2] == (2, 2)
    assert run(out, x).ravel() == pytest.approx([3, 8, 0, 0])


def test_glu_split_and_swiglu_oai():
    g = Graph()
    a = g.new_tensor("f32", [3])
    b = g.new_tensor("f32", [3])
    xa = np.array([0.0, math.log(3), -1.0], dtype=np.float32)
    xb = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    out = glu_split(a, b, "SWIGLU")
    assert out.ne == a.ne and out.src == [a, b]
    assert run(out, xa, xb) == pytest.approx([0.0, 0.75 * math.log(3) * 2, -3 / (1 + math.e)], rel=1e-6)

    g = Graph()
    a = g.new_tensor("f32", [3])
    b = g.new_tensor("f32", [3])
    out = swiglu_oai(a, b, 1.702, 7.0)
    assert out.param_i32(0) == 3 and [out.param_f32(2), out.param_f32(3)] == pytest.approx([1.702, 7.0])
    xa = np.array([0.0, 100.0, -2.0], dtype=np.float32)
    xb = np.array([5.0, 100.0, -100.0], dtype=np.float32)
    sig = lambda v: 1 / (1 + math.exp(-v))
    want = [0.0, 7.0 * sig(1.702 * 7.0) * 8.0, -2.0 * sig(-1.702 * 2.0) * -6.0]  # x <= 7, g in [-7, 7]
    assert run(out, xa, xb) == pytest.approx(want, rel=1e-6)


def test_softcap_chain():
    case = Case(FAMILIES["softcap"], dict(type="f32", ne=[10, 10, 10, 10], softcap=50.0))
    g = case.build()
    assert [n.op_desc for n in g.nodes()] == ["SCALE", "TANH", "SCALE"]
    assert g.check_nodes == [g.out]
    inputs = case.init_inputs(g, 0)
    x = inputs[g.leaves[0].index].astype(np.float64)
    out = reference.compute(g, inputs).read(g.out)
    assert out == pytest.approx(50 * np.tanh(x / 50), rel=1e-5, abs=1e-6)


def _numpy_run(case):
    g = case.build()
    inputs = case.init_inputs(g, 1)
    res = NumpyDevice().run(case, g, inputs, [g.out.index])
    return g, inputs, res.outputs[g.out.index]


@functools.lru_cache(maxsize=None)
def _test_cases():
    return {c.name: c for c in all_cases("test")}


def _case(name):
    return _test_cases()[name]


@pytest.mark.parametrize("layout,swap", [("halves", True), ("bcast", False), ("strided_dim1", False)])
def test_unary_mul_layouts(layout, swap):
    case = _case(f"SILU_MUL(type=f32,ne=[128,2,2,2],swap={int(swap)},layout={layout},tail=)")
    g, inputs, out = _numpy_run(case)
    base = inputs[g.leaves[0].index].astype(np.float64)
    silu = lambda v: v / (1 + np.exp(-v))
    if layout == "halves":  # b = first half of each row, a = second half
        want = base[..., :128] * silu(base[..., 128:])
    elif layout == "bcast":  # b has one row, broadcast onto a
        want = silu(base) * inputs[g.leaves[1].index].astype(np.float64)
    else:  # a = the first 2 of every 6 rows in dim 1
        want = silu(base[:, :, :2, :]) * inputs[g.leaves[1].index]
    assert out == pytest.approx(want, rel=1e-5, abs=1e-7)


def test_unary_mul_tails():
    g, inputs, out = _numpy_run(_case("SIGMOID_MUL(type=f32,ne=[128,2,2,2],swap=0,layout=packed,tail=reuse)"))
    a, b = (inputs[t.index].astype(np.float64) for t in g.leaves)
    u = 1 / (1 + np.exp(-a))
    assert out == pytest.approx(u * b + u, rel=1e-5, abs=1e-6)
    assert g.check_nodes == [g.out]


def test_glu_view_case_reads_strided_rows():
    # v=1: a is the first third of each row of a 3x wider tensor
    g, inputs, out = _numpy_run(_case("SWIGLU(type=f32,ne_a=[128,2,2,2],v=1,swapped=1)"))
    big = inputs[g.leaves[0].index].astype(np.float64)
    assert big.shape[-1] == 384
    x, gate = big[..., 64:128], big[..., :64]
    with np.errstate(over="ignore"):
        want = x / (1 + np.exp(-x)) * gate
    assert out == pytest.approx(want, rel=1e-5, abs=1e-6)


def test_input_ranges_follow_the_structs():
    for name, lo, hi in [("SQRT(type=f32,ne=[10,3,3,2])", 50, 100), ("LOG(type=f32,ne=[10,5,4,3])", 0.9, 1.1),
                         ("SIN(type=f32,ne=[10,2,2,2])", -6.5, 6.5), ("ROUND(type=f32,ne=[10,2,2,2])", -10, 10),
                         ("REGLU(type=f32,ne_a=[128,2,2,2],v=0,swapped=0)", -150, 150),
                         ("EXP(type=f16,ne_a=[128,2,2,2],v=0)", -10, 10),
                         ("XIELU(type=f32,ne=[10,5,4,3])", -1, 1)]:
        case = _case(name)
        g = case.build()
        x = np.concatenate([v.ravel().astype(np.float32) for v in case.init_inputs(g, 0).values()])
        assert lo <= x.min() and x.max() <= hi and x.max() - x.min() > 0.8 * (hi - lo), name


def test_thresholds_and_fused_flags():
    f16 = _case("SOFTPLUS_MUL(type=f16,ne=[5,7,11,13],swap=0,layout=packed,tail=)")
    assert f16.family.threshold(f16.params) == 5e-5 and f16.family.fused
    f32 = _case("SILU_MUL(type=f32,ne=[5,7,11,13],swap=0,layout=packed,tail=)")
    assert f32.family.threshold(f32.params) == 1e-7
    assert not any(c.op in ("SOFTCAP", "RELU_SQR", "SILU_MUL") for c in all_cases("support"))


def test_perf_cases():
    names = {c.name for c in all_cases("perf") if c.op == "SWIGLU"}
    assert "SWIGLU(type=f16,ne_a=[34816,2048,1,1],v=0,swapped=0)" in names
    assert "SWIGLU(type=f32,ne_a=[17408,512,1,1],v=0,split)" in names
    case = next(c for c in all_cases("perf") if c.name == "SWIGLU(type=f32,ne_a=[34816,512,1,1],v=0,swapped=0)")
    assert case.build().out.ne == (17408, 512, 1, 1)


# --- against ggml (skipped where the bridge is not built) ---

MY_FAMILIES = ("unary", "xielu", "relu_sqr", "unary_mul", "sqr", "sqrt", "log", "sin", "cos", "clamp",
               "leaky_relu", "floor", "ceil", "round", "trunc", "scale", "softcap", "glu", "glu_split",
               "swiglu_oai")


def test_every_graph_is_what_ggml_constructors_build(ggml_cpu):
    """Each node replayed through libggml's constructor has our type, ne, nb, op, op_params,
    srcs and view (the device raises otherwise): eval and perf grids."""
    for mode in ("test", "perf"):
        for c in all_cases(mode):
            if c.family.name in MY_FAMILIES:
                ggml_cpu.replay(c.build()).free()


def test_one_case_per_op_agrees_with_ggml_cpu(ggml_cpu):
    from cannops.cli.engine.execute import CaseOptions, test as run_test
    first = {}
    for c in all_cases("test"):
        if c.family.name in MY_FAMILIES and "1024,1024" not in c.vars:
            first.setdefault((c.family.name, c.op, c.params.get("type")), c)
    bad = [(c.name, r.reason) for c in first.values() for r in [run_test(ggml_cpu, c, CaseOptions(seed=3))] if r.status != "OK"]
    assert len(first) > 80 and not bad


def test_ggml_cpu_gelu_quick_goes_through_an_f16_table(ggml_cpu):
    """ggml-CPU rounds f32 GELU_QUICK inputs to f16 and looks the result up in an f16 table
    (vec.h): it equals that model exactly, and stays under the NMSE threshold vs the exact f32
    reference only because the rounding errors are ~2^-12 relative (NMSE ~5e-8 < 1e-7)."""
    from cannops.backend.reference.unary import gelu_quick
    c = _case("GELU_QUICK(type=f32,ne_a=[5,7,11,13],v=0)")
    g = c.build()
    inputs = c.init_inputs(g, 0)
    out = ggml_cpu.run(c, g, inputs, [g.out.index]).outputs[g.out.index].astype(np.float64)
    x = inputs[g.leaves[0].index]
    with np.errstate(over="ignore"):
        table = gelu_quick(x.astype(np.float16).astype(np.float32)).astype(np.float16)
    np.testing.assert_array_equal(out, table.astype(np.float64))
    ref = reference.compute(g, inputs).read(g.out).astype(np.float64)
    assert 1e-9 < np.sum((ref - out) ** 2) / np.sum(ref ** 2) < 1e-7
