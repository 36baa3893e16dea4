"""`ops grad`: test-backend-ops' gradient mode. The error metric and finite differences
against hand-computed values, libggml's backward graph read into our case model, the
gradients of GGML-CPU and CANN-SIM, and a broken backward (test-only FAULTY) as a FAIL."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from cannops.backend.base import numeric_gradient, open_device
from cannops.cases import Case, family
from cannops.cli.engine.execute import grad, mean_abs_asymmetry


def tiny(op, ne=(4, 3, 1, 1), type="f32"):
    """A small unary case (a grid point of test_unary with a smaller shape)."""
    return Case(family("unary"), dict(op=op, type=type, ne_a=list(ne), v=0))


def test_mean_abs_asymmetry_as_test_backend_ops():
    assert mean_abs_asymmetry(np.array([1.0, 3.0]), np.array([1.0, 1.0])) == pytest.approx(0.25)
    # an element where both are 0 makes the C++ mean NaN (a pass there); defined_only skips it
    assert np.isnan(mean_abs_asymmetry(np.array([0.0, 3.0]), np.array([0.0, 1.0])))
    assert mean_abs_asymmetry(np.array([0.0, 3.0]), np.array([0.0, 1.0]), defined_only=True) == pytest.approx(0.5)
    # expected values: only elements whose numeric gradient is one of them are compared
    assert mean_abs_asymmetry(np.array([1.0, 0.4]), np.array([1.0, 5.0]), expect=(0.0, 1.0)) == 0.0


def test_finite_differences_of_a_cubic():
    x0 = np.array([0.5, -1.0, 2.0], np.float32)
    x = x0.astype(np.float64).copy()

    def set_element(i, v):
        x[i] = v
    loss = lambda: float(np.sum(x ** 3))
    # central differences: 3x^2 + eps^2; the 4-point rule is exact on a cubic
    two = numeric_gradient(x0, set_element, loss, 0.1, precise=False)
    four = numeric_gradient(x0, set_element, loss, 0.1, precise=True)
    np.testing.assert_allclose(two, 3 * x0.astype(np.float64) ** 2 + 0.01, rtol=1e-4)
    np.testing.assert_allclose(four, 3 * x0.astype(np.float64) ** 2, rtol=1e-4)
    np.testing.assert_array_equal(x, x0)   # every element is put back


def test_backward_graph_is_libggmls():
    from cannops.backend.ggml.backward import backward_case_graph
    case = tiny("NEG")
    g = case.build()
    inputs = case.init_inputs(g, 0)
    bw = backward_case_graph(g, inputs)
    # forward: NEG then the loss (sum of the output); the gradient of `a` is computed
    assert [n.op_desc for n in bw.forward] == ["NEG", "SUM"]
    (index, leaf), = bw.params.items()
    assert leaf.name == "a" and leaf.ne == g.tensors[index].ne
    grad_node = bw.grads[index]
    assert grad_node is not None and grad_node.ne == leaf.ne and grad_node not in bw.forward
    np.testing.assert_array_equal(bw.inputs[leaf.index], inputs[index])


@pytest.mark.parametrize("device", ["GGML-CPU", "CANN-SIM"])
@pytest.mark.parametrize("op,expect", [("NEG", -1.0), ("ABS", None)])
def test_gradients_on_devices(device, op, expect):
    case = tiny(op)
    g = case.build()
    inputs = case.init_inputs(g, 0)
    dev = open_device(device)
    try:
        (pg,) = dev.grad(case, g, inputs)
        r = grad(dev, case, 0)
    finally:
        dev.close()
    x = inputs[g.params()[0].index].reshape(-1)
    want = np.full(12, expect) if expect is not None else np.sign(x)
    np.testing.assert_allclose(pg.analytic, want)
    # finite differences with test_unary's step of 15 see ABS's kink only within 15 of 0
    far = np.abs(x) > 15
    assert far.sum() >= 6
    np.testing.assert_allclose(pg.numeric[far], want[far], atol=1e-5)
    assert r.status == "OK" and r.metric == "MAA", r.reason


def test_a_broken_backward_fails_with_its_error(monkeypatch):
    monkeypatch.setenv("OPS_FAULTY", "badgrad=NEG")
    dev = open_device("FAULTY")
    r = grad(dev, tiny("NEG"), 0)
    assert r.status == "FAIL"
    assert "MAA = 0.200000000 > 0.000100000" in r.reason and "max abs error 0.5" in r.reason
    assert grad(dev, tiny("ABS"), 0).status == "OK"


def test_ops_grad_command():
    """End to end: the statuses and reasons test-backend-ops prints in grad mode."""
    env = dict(os.environ, OPS_FAULTY="badgrad=NEG")
    p = subprocess.run([sys.executable, "-m", "cannops.cli.main", "grad", "-b", "GGML-CPU", "-o", "NEG,EXP",
                        "-p", r"ne_a=\[128,2,2,2\],v=0"], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "NEG(type=f32,ne_a=[128,2,2,2],v=0): OK" in p.stdout
    assert "EXP(type=f32,ne_a=[128,2,2,2],v=0): not supported [EXP]" in p.stdout   # no backward
    assert "NEG(type=f16,ne_a=[128,2,2,2],v=0): not supported [NEG->type != FP32]" in p.stdout
    p = subprocess.run([sys.executable, "-m", "cannops.cli.main", "grad", "-b", "FAULTY", "-o", "NEG",
                        "-p", r"type=f32,ne_a=\[128,2,2,2\],v=0", "--output", "json"],
                       capture_output=True, text=True, env=env)
    assert p.returncode == 1
    doc = json.loads(p.stdout)
    assert doc["mode"] == "grad"
    (r,) = doc["results"]
    assert r["status"] == "FAIL" and r["metric"] == "MAA" and r["error"] == pytest.approx(0.2)


def test_a_permuted_operands_gradient_is_read_through_its_strides():
    """B of MUL_MAT created permuted: its gradient is the permute of a contiguous one, a
    non-contiguous ggml tensor (read wrongly as contiguous, the check FAILs by far)."""
    from cannops.cases import all_cases
    name = "MUL_MAT(type_a=f32,type_b=f32,m=16,n=4,k=4,bs=[2,3],nr=[1,1],per=[0,3,2,1],k_v=0,o=1)"
    case = next(c for c in all_cases("grad") if c.name == name)
    dev = open_device("GGML-CPU")
    try:
        r = grad(dev, case, 0)
    finally:
        dev.close()
    assert r.status == "OK", r.reason


# --- recorded grad deviations: the reason must be true, and a broken backward still FAILs ---

def _case(name):
    from cannops.cases import all_cases
    return next(c for c in all_cases("grad") if c.name == name)


def _gradients_on_ggml_cpu(case):
    """The case's leaves by name, its one parameter's gradients and its `ops grad` result."""
    g = case.build()
    inputs = case.init_inputs(g, 0)
    dev = open_device("GGML-CPU")
    try:
        (pg,) = dev.grad(case, g, inputs)
        r = grad(dev, case, 0)
    finally:
        dev.close()
    return {t.name: inputs[t.index] for t in g.leaves}, pg, r


SINKS = ("SOFT_MAX(type=f32,ne=[16,16,1,1],mask=0,sinks=1,m_prec=f32,nr23=[1,1],"
         "scale={},max_bias=0.000000,inplace=0)")


@pytest.mark.parametrize("scale", [1.0, 0.1])
def test_softmax_sinks_backprop_is_exact_where_finite_differences_fail(scale):
    """The SOFT_MAX-with-sinks deviation says backprop is right and the differences are
    not: check both against the exact float64 gradient of sum(softmax with a sink)."""
    leaf, pg, r = _gradients_on_ggml_cpu(_case(SINKS.format(f"{scale:.6f}")))
    a = leaf["a"].astype(np.float64).reshape(16, 16)
    sink = float(leaf["sinks"].reshape(-1)[0])     # one head: one sink logit for every row
    z = scale * a
    m = np.maximum(z.max(axis=1, keepdims=True), sink)
    e = np.exp(z - m)
    y = e / (e.sum(axis=1, keepdims=True) + np.exp(sink - m))
    exact = (scale * y * (1 - y.sum(axis=1, keepdims=True))).reshape(-1)
    assert mean_abs_asymmetry(exact, pg.analytic) < 1e-5
    assert mean_abs_asymmetry(pg.numeric, pg.analytic) > 1e-4     # what test-backend-ops checks
    assert r.status == "known deviation" and "finite differences cannot check" in r.note


def test_a_deviation_explains_only_errors_up_to_its_ceiling(monkeypatch):
    """SCALE with a bias: the differences miss the exact gradient 2 by the loss' rounding
    (a recorded deviation up to MAA 2e-3); a backward off by 1.5x is still a FAIL."""
    case = _case("SCALE(type=f32,ne=[10,10,10,10],scale=2.000000,bias=1.000000,inplace=0)")
    _, pg, r = _gradients_on_ggml_cpu(case)
    np.testing.assert_array_equal(pg.analytic, 2.0)
    assert r.status == "known deviation" and r.error < 2e-3
    monkeypatch.setenv("OPS_FAULTY", "badgrad=SCALE")
    faulty = open_device("FAULTY")
    r = grad(faulty, case, 0)
    assert r.status == "FAIL" and r.error > 0.1


def test_grad_mode_runs_what_test_backend_ops_does():
    """test-backend-ops' grad mode drops the cases that run their whole graph (fused ones,
    as support mode does) and OPT_STEP_ADAMW."""
    from cannops.cases import all_cases
    grad_names = {c.name for c in all_cases("grad")}
    support = {c.name for c in all_cases("support")}
    assert grad_names == {n for n in support if not n.startswith("OPT_STEP_ADAMW(")}
    assert not any(n.startswith(("RMS_NORM_MUL_ADD(", "ADD_RMS_NORM(")) for n in grad_names)


def test_f16_mul_mat_backprop_is_exact_where_finite_differences_fail():
    """MUL_MAT's grad deviation: with an f16 A, ggml-CPU rounds B to f16 in the forward, so
    the differences are off; backprop is A^T G (G = 1: A's column sums), right to 1e-6."""
    leaf, pg, r = _gradients_on_ggml_cpu(_case(
        "MUL_MAT(type_a=f16,type_b=f32,m=16,n=1,k=256,bs=[3,2],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)"))
    a = leaf["a"].astype(np.float64)                       # [bs1, bs0, m, k]
    exact = np.broadcast_to(a.sum(axis=2, keepdims=True), leaf["b"].shape).reshape(-1)
    assert pg.name == "b"
    assert mean_abs_asymmetry(exact, pg.analytic) < 1e-6
    assert mean_abs_asymmetry(pg.numeric, pg.analytic) > 1e-4
    assert r.status == "known deviation"
