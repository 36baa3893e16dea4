"""CROSS_ENTROPY_LOSS(_BACK), OPT_STEP_ADAMW, OPT_STEP_SGD, SILU_BACK, RMS_NORM_BACK and the
DSV4 hyper-connection ops: constructors, references on hand-checkable values, the grids,
and every case on GGML-CPU."""
import numpy as np
import pytest

from _sample import assert_ok, cases_of
from cannops.backend.reference import dsv4 as dref
from cannops.backend.reference import training as ref
from cannops.cases.dsv4 import dsv4_hc_comb
from cannops.cases.graph import FLAG_PARAM, Graph
from cannops.cases.training import cross_entropy_loss, opt_step_adamw, opt_step_sgd, rms_norm_back

OPS = ("CROSS_ENTROPY_LOSS", "CROSS_ENTROPY_LOSS_BACK", "OPT_STEP_ADAMW", "OPT_STEP_SGD", "SILU_BACK",
       "RMS_NORM_BACK", "DSV4_HC_PRE", "DSV4_HC_POST", "DSV4_HC_COMB")


def test_constructors():
    g = Graph()
    a, b = g.new_tensor("f32", [10, 5]), g.new_tensor("f32", [10, 5])
    assert cross_entropy_loss(a, b).ne == (1, 1, 1, 1)
    with pytest.raises(AssertionError):   # the optimizer steps insist on a parameter
        opt_step_sgd(a, b, g.new_tensor("f32", [2]))
    a.flags |= FLAG_PARAM
    step = opt_step_adamw(a, b, b, b, g.new_tensor("f32", [7]))
    assert step.view_src is a and step.nb == a.nb and step.src[0] is a   # an in-place update of a
    assert rms_norm_back(a, b, 1e-4).param_f32(0) == pytest.approx(1e-4)
    comb = dsv4_hc_comb(g.new_tensor("f32", [24, 3]), g.new_tensor("f32", [3]), g.new_tensor("f32", [24]), 1e-6, 5)
    assert comb.ne == (4, 4, 3, 1) and comb.param_i32(1) == 5 and comb.param_f32(0) == pytest.approx(1e-6)


def test_cross_entropy_by_hand():
    logits = np.log(np.array([[1.0, 3.0], [2.0, 2.0]]))          # softmax rows (1/4, 3/4), (1/2, 1/2)
    labels = np.array([[0.0, 1.0], [1.0, 0.0]])
    loss = ref.cross_entropy_loss(None, logits, labels)
    assert loss[0] == pytest.approx(-(np.log(0.75) + np.log(0.5)) / 2)
    d = ref.cross_entropy_loss_back(None, np.array([2.0]), logits, labels)
    np.testing.assert_allclose(d, [[0.25, -0.25], [-0.5, 0.5]])   # (softmax - labels) * 2 / 2


def test_optimizer_steps_by_hand():
    w, g, m, v = (np.array([x]) for x in (1.0, 0.5, 0.2, 0.1))
    params = np.array([0.1, 0.9, 0.99, 1e-8, 0.01, 10.0, 100.0])
    m1, v1 = 0.9 * 0.2 + 0.1 * 0.5, 0.99 * 0.1 + 0.01 * 0.25
    expect = 1.0 * (1 - 0.1 * 0.01) - 0.1 * (m1 * 10.0) / (np.sqrt(v1 * 100.0) + 1e-8)
    assert ref.opt_step_adamw(None, w, g, m, v, params)[0] == pytest.approx(expect)
    assert ref.opt_step_sgd(None, w, g, np.array([0.1, 0.5]))[0] == pytest.approx(0.95 - 0.05)


def test_backward_ops_are_gradients():
    x, dy = np.linspace(-3, 3, 7), np.linspace(1, 2, 7)
    h = 1e-6
    silu = lambda z: z / (1 + np.exp(-z))
    np.testing.assert_allclose(ref.silu_back(None, dy, x), dy * (silu(x + h) - silu(x - h)) / (2 * h), rtol=1e-6)

    class N:
        def param_f32(self, i): return 0.1
    x, dz = np.array([[1.0, -2.0, 0.5]]), np.array([[0.3, 0.1, -1.0]])
    f = lambda z: (z / np.sqrt((z * z).mean() + 0.1) * dz).sum()
    numeric = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(3)]
    np.testing.assert_allclose(ref.rms_norm_back(N(), dz, x)[0], numeric, rtol=1e-6)


def test_hc_comb_is_doubly_stochastic_after_many_iterations():
    class N:
        def param_f32(self, i): return 0.0
        def param_i32(self, i): return 50
    mixes = np.random.default_rng(0).uniform(-2, 2, (1, 1, 3, 24))
    M = dref.dsv4_hc_comb(N(), mixes, np.array([0.1, 0.2, 0.4]), np.zeros(24))
    np.testing.assert_allclose(M.sum(axis=-2), 1.0, atol=1e-12)   # columns exactly (normalised last)
    np.testing.assert_allclose(M.sum(axis=-1), 1.0, atol=1e-6)    # rows: Sinkhorn converged


def test_grids_and_all_cases_on_ggml_cpu():
    sizes = {op: len(cases_of(op)) for op in OPS}
    assert sizes == {"CROSS_ENTROPY_LOSS": 2, "CROSS_ENTROPY_LOSS_BACK": 2, "OPT_STEP_ADAMW": 1, "OPT_STEP_SGD": 1,
                     "SILU_BACK": 1, "RMS_NORM_BACK": 10, "DSV4_HC_PRE": 4, "DSV4_HC_POST": 4, "DSV4_HC_COMB": 4}
    assert_ok("GGML-CPU", cases_of(*OPS))
