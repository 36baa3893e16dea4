"""The convolution families: ggml's constructors (shapes, strides, op_params), the
reference on hand-checkable inputs and against an explicit sum, and sampled catalog cases
on GGML-CPU."""
import itertools

import numpy as np
import pytest

from _sample import assert_ok, cases_of, sample
from cannops.backend.reference.conv import conv_2d, conv_3d, conv_transpose_1d, conv_transpose_2d, correlate
from cannops.cases import conv as C
from cannops.cases.graph import Graph

OPS = ("CONV_2D", "CONV_2D_DW", "CONV_3D", "CONV_TRANSPOSE_1D", "CONV_TRANSPOSE_2D")


def test_output_size_truncates_like_c():
    assert C.conv_out(141, 11, 3, 5, 2) == 44
    # (1 + 4 - 8 - 1) / 5 = -4 / 5 is 0 in C (floor would give -1): one output
    assert C.conv_out(1, 3, 5, 2, 4) == 1
    assert C.conv_out(1, 11, 5, 2, 4) <= 0


def test_constructors():
    g = Graph()
    x, w = g.new_tensor("f32", [141, 133, 25, 2]), g.new_tensor("f16", [3, 11, 25, 12])
    t = C.conv_2d_direct(w, x, 3, 5, 5, 2, 2, 4)
    assert t.op == "CONV_2D" and t.type.name == "f32"
    assert t.ne == (49, 20, 12, 2) and [t.param_i32(i) for i in range(6)] == [3, 5, 5, 2, 2, 4]
    # depth-wise: a CWHN input gives a CWHN output
    x = g.new_tensor("f32", [17, 34, 9, 1])
    xc, kc = C._cwhn(g, x, g.new_tensor("f32", [3, 3, 1, 9]))
    assert xc.ne == x.ne and C.is_contiguous_channels(xc)
    t = C.conv_2d_dw_direct(kc, xc, 1, 1, 0, 0, 1, 1)
    assert t.ne == (15, 32, 9, 1) and t.nb == (36, 15 * 36, 4, 15 * 32 * 36)
    t = C.conv_3d_direct(g.new_tensor("f32", [5, 1, 3, 12]), g.new_tensor("f32", [20, 22, 18, 6]),
                         2, 1, 1, 2, 0, 1, 1, 1, 2, 3, 2, 4)
    assert t.ne == (10, 22, 16, 8) and t.param_i32(9) == 3 and t.param_i32(11) == 4
    t = C.conv_transpose_1d(g.new_tensor("f32", [16, 32, 32]), g.new_tensor("f32", [197, 32]), 2, 0, 1)
    assert t.ne == (408, 32, 1, 1) and [t.param_i32(i) for i in range(3)] == [2, 0, 1]
    t = C.conv_transpose_2d_p0(g.new_tensor("f16", [3, 3, 1, 9]), g.new_tensor("f32", [10, 10, 9, 1]), 2)
    assert t.ne == (21, 21, 1, 1) and t.type.name == "f32" and t.param_i32(0) == 2


def test_catalog_sizes():
    count = {op: len(cases_of(op)) for op in OPS}
    assert count == {"CONV_2D": 3140, "CONV_2D_DW": 8, "CONV_3D": 146, "CONV_TRANSPOSE_1D": 115,
                     "CONV_TRANSPOSE_2D": 6}
    assert len(cases_of("CONV_2D", mode="perf")) == 44


def _node(build):
    g = Graph()
    return build(g)


def test_conv_transpose_1d_by_hand():
    x = np.array([1, 2, 3], np.float32).reshape(1, 1, 1, 3)     # L = 3, IC = 1
    w = np.array([1, 10], np.float32).reshape(1, 1, 1, 2)        # K = 2, OC = 1
    for s, expect in ((2, [1, 10, 2, 20, 3, 30]), (1, [1, 12, 23, 30]), (3, [1, 10, 0, 2, 20, 0, 3, 30])):
        node = _node(lambda g: C.conv_transpose_1d(g.new_tensor("f32", [2, 1, 1]), g.new_tensor("f32", [3, 1]), s, 0, 1))
        np.testing.assert_allclose(conv_transpose_1d(node, w, x).ravel(), expect)


def _direct(x, w, stride, pad, dil, out_size):
    """The definition, one output at a time."""
    n, c = x.shape[:2]
    out = np.zeros((n, w.shape[0]) + tuple(out_size))
    for idx in itertools.product(*(range(o) for o in out_size)):
        for tap in itertools.product(*(range(k) for k in w.shape[2:])):
            pos = [i * s + t * d - p for i, s, t, d, p in zip(idx, stride, tap, dil, pad)]
            if all(0 <= q < size for q, size in zip(pos, x.shape[2:])):
                out[(slice(None), slice(None)) + idx] += x[(slice(None), slice(None)) + tuple(pos)] @ \
                    w[(slice(None), slice(None)) + tap].T
    return out


def test_conv_2d_and_3d_against_the_definition():
    rng = np.random.default_rng(0)
    node = _node(lambda g: C.conv_2d_direct(g.new_tensor("f32", [3, 2, 4, 5]), g.new_tensor("f32", [9, 7, 4, 2]),
                                            2, 1, 1, 3, 1, 2))
    x, w = rng.uniform(-1, 1, (2, 4, 7, 9)), rng.uniform(-1, 1, (5, 4, 2, 3))
    np.testing.assert_allclose(conv_2d(node, w, x), _direct(x, w, (1, 2), (3, 1), (2, 1), node.ne[1::-1]),
                               rtol=1e-5, atol=1e-5)
    # ggml's size rule gives an output even where the padded input is shorter than the kernel
    assert np.all(correlate(np.ones((1, 1, 1, 1)), np.ones((1, 1, 3, 1)), (5, 1), (2, 0), (4, 1), (1, 1)) == 0)
    # CONV_3D: channels are the inner part of ggml's 4th dim (n*IC + ic, oc*IC + ic)
    n, ic, oc = 2, 3, 2
    node = _node(lambda g: C.conv_3d_direct(g.new_tensor("f32", [3, 1, 2, ic * oc]), g.new_tensor("f32", [6, 5, 4, ic * n]),
                                            2, 1, 1, 1, 0, 1, 1, 1, 2, ic, n, oc))
    x, w = rng.uniform(-1, 1, (n * ic, 4, 5, 6)), rng.uniform(-1, 1, (oc * ic, 2, 1, 3))
    expect = _direct(x.reshape(n, ic, 4, 5, 6), w.reshape(oc, ic, 2, 1, 3), (1, 1, 2), (1, 0, 1), (2, 1, 1),
                     node.ne[2::-1])
    np.testing.assert_allclose(conv_3d(node, w, x), expect.reshape(n * oc, *expect.shape[2:]), rtol=1e-5, atol=1e-5)


def test_conv_transpose_2d_is_the_adjoint_of_a_strided_correlation():
    rng = np.random.default_rng(1)
    node = _node(lambda g: C.conv_transpose_2d_p0(g.new_tensor("f32", [3, 2, 4, 5]), g.new_tensor("f32", [4, 3, 5, 1]), 2))
    x, w = rng.uniform(-1, 1, (1, 5, 3, 4)), rng.uniform(-1, 1, (5, 4, 2, 3))   # w: (IC, OC, KH, KW)
    y = conv_transpose_2d(node, w, x)
    assert y.shape == (1, 4, 6, 9)
    z = rng.uniform(-1, 1, y.shape)
    # <convT(x), z> = <x, corr(z)> with the same kernel read as (OC -> IC)
    back = correlate(z, w, (2, 2), (0, 0), (1, 1), (3, 4))
    assert np.isclose((y * z).sum(), (x * back).sum())


@pytest.mark.parametrize("op,n", [("CONV_2D", 16), ("CONV_2D_DW", 8), ("CONV_3D", 8), ("CONV_TRANSPOSE_1D", 12),
                                  ("CONV_TRANSPOSE_2D", 4)])
def test_sampled_cases_on_ggml_cpu(op, n):
    # the CPU's CONV_2D refuses a non-contiguous kernel (some CWHN cases), as test-backend-ops' CPU column says
    small = [c for c in cases_of(op) if "256" not in c.vars and "129" not in c.vars]
    assert_ok("GGML-CPU", sample(small, n), allow_unsupported=(op == "CONV_2D"))
