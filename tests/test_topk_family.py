"""TOP_K and TOPK_MOE: constructors, the reference and test_top_k's metric on small inputs,
the catalog (ties cases are test-mode only), and sampled cases on GGML-CPU."""
import numpy as np
import pytest

from cannops.backend.reference.topk import top_k as ref_top_k
from cannops.cases import FAMILIES, Case
from cannops.cases.graph import Graph
from cannops.cases.topk import argsort_top_k, jdst, top_k, top_k_err

from _sample import assert_ok, cases_of, sample


def test_top_k_shape_and_reference():
    g = Graph()
    t = top_k(g.new_tensor("f32", [5, 2, 3]), 2)
    assert t.ne == (2, 2, 3, 1) and t.type.name == "i32" and t.op == "TOP_K"
    with pytest.raises(AssertionError):
        top_k(g.new_tensor("f32", [5]), 6)
    a = np.array([[3.0, 9.0, -1.0, 7.0, 0.5]], np.float32)
    assert ref_top_k(top_k(g.new_tensor("f32", [5]), 2), a).tolist() == [[1, 3]]


def test_argsort_top_k_is_a_view_of_a_descending_argsort():
    g = Graph()
    v = argsort_top_k(g.new_tensor("f32", [8, 3]), 3)
    s = v.view_src
    assert v.op == "VIEW" and s.op == "ARGSORT" and s.param_i32(0) == 1
    assert v.ne == (3, 3, 1, 1) and v.nb == s.nb


def test_top_k_metric_without_ties_ignores_order_only():
    p = dict(k=2, ne=[5, 2, 1, 1], ties=False)
    ref = np.array([1, 3, 0, 4], np.float32)
    assert top_k_err(ref, np.array([3, 1, 4, 0], np.float32), p, None) == 0.0
    assert top_k_err(ref, np.array([1, 2, 0, 4], np.float32), p, None) == 0.25   # one index of 4 wrong
    assert top_k_err(ref, np.array([1, 3, 0, 4.5], np.float32), p, None) > 0      # not an integer


def test_top_k_metric_with_ties_compares_the_values_picked():
    p = dict(k=2, ne=[4, 1, 1, 1], ties=True)
    src = np.array([[5.0, 1.0, 5.0, 5.0]], np.float32)
    ref = np.array([0, 2], np.float32)
    assert top_k_err(ref, np.array([3, 2], np.float32), p, src) == 0.0            # another 5: fine
    assert top_k_err(ref, np.array([3, 1], np.float32), p, src) == 0.5            # picked the 1
    assert top_k_err(ref, np.array([2, 2], np.float32), p, src) == 1.0            # index repeated
    assert jdst(np.array([1, 1, 2]), np.array([1, 2, 2])) == pytest.approx(1 / 3)


def test_catalog():
    plain = [c.name for c in cases_of("TOP_K", mode="support")]
    every = [c.name for c in cases_of("TOP_K")]
    assert len(plain) == len(set(plain)) == 300 and len(every) == len(set(every)) == 440
    assert all("ties=1" in n for n in set(every) - set(plain))
    moe = cases_of("TOPK_MOE")
    assert len(moe) == 320 and not cases_of("TOPK_MOE", mode="support")
    assert moe[0].name == "TOPK_MOE(ne=[8,22,1,1],n_expert_used=4,with_norm=0,bias_probs=0,gating_func=0,scale_w=0.000000)"


def test_tied_inputs_repeat_values():
    case = Case(FAMILIES["top_k_ties"], dict(type="f32", ne=[40, 1, 2, 1], k=7, ties=True))
    g = case.build()
    a = case.init_inputs(g, 0)[g.leaves[0].index].reshape(2, 40)
    assert sorted(a[0].tolist()) == [float(i // 3) for i in range(40)]


def test_sampled_cases_ok_on_ggml_cpu():
    assert_ok("GGML-CPU", sample([c for c in cases_of("TOP_K") if c.params["ne"][0] < 5000], 30)
              + sample(cases_of("TOPK_MOE"), 20))
