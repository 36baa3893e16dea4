"""MUL_MAT_ID, MUL_MAT_ID_FUSION, OUT_PROD, MUL_MAT_HADAMARD and MUL_MAT_VEC_FUSION:
constructors, the reference on hand-checkable inputs, the row-id and Hadamard inputs,
the catalog, and sampled small cases on GGML-CPU."""
import collections

import numpy as np
import pytest
from _sample import assert_ok, cases_of, sample

from cannops.backend.reference.moe import mul_mat_id as ref_mul_mat_id
from cannops.backend.reference.moe import out_prod as ref_out_prod
from cannops.cases import FAMILIES, Case, all_cases
from cannops.cases.graph import Graph
from cannops.cases.moe import init_hadamard, init_moe, mul_mat_id, out_prod

OPS = ("MUL_MAT_ID", "MUL_MAT_ID_FUSION", "OUT_PROD", "MUL_MAT_HADAMARD", "MUL_MAT_VEC_FUSION")


def test_mul_mat_id_shape_and_products_by_hand():
    g = Graph()
    as_, b, ids = g.new_tensor("f32", [3, 2, 4]), g.new_tensor("f32", [3, 1, 2]), g.new_tensor("i32", [2, 2])
    t = mul_mat_id(as_, b, ids)
    assert t.ne == (2, 2, 2, 1) and t.type.name == "f32" and t.src == [as_, b, ids]
    with pytest.raises(AssertionError):   # 3 slots do not share 2 rows of b
        mul_mat_id(as_, g.new_tensor("f32", [3, 2, 2]), g.new_tensor("i32", [3, 2]))
    experts = np.arange(24, dtype=np.float32).reshape(1, 4, 2, 3)    # expert e: rows of 3
    x = np.array([[1, 0, 0], [0, 1, 1]], np.float32).reshape(1, 2, 1, 3)   # one row per token
    sel = np.array([[3, 0], [1, 1]], np.int32).reshape(1, 1, 2, 2)
    out = ref_mul_mat_id(t, experts, x, sel)
    assert out.shape == (1, 2, 2, 2)
    # token 0 reads column 0 of experts 3 and 0; token 1 sums columns 1 and 2 of expert 1
    np.testing.assert_array_equal(out[0, 0], [[18, 21], [0, 3]])
    np.testing.assert_array_equal(out[0, 1], [[7 + 8, 10 + 11]] * 2)


def test_mul_mat_id_pairs_b_rows_with_slots():
    g = Graph()
    t = mul_mat_id(g.new_tensor("f32", [2, 1, 2]), g.new_tensor("f32", [2, 2, 1]), g.new_tensor("i32", [2, 1]))
    experts = np.array([[1, 0], [0, 1]], np.float32).reshape(1, 2, 1, 2)
    x = np.array([[5, 6], [7, 8]], np.float32).reshape(1, 1, 2, 2)
    out = ref_mul_mat_id(t, experts, x, np.array([1, 0], np.int32).reshape(1, 1, 1, 2))
    np.testing.assert_array_equal(out[0, 0, :, 0], [6, 7])   # slot 0: expert 1 on row 0, slot 1: expert 0 on row 1


def test_out_prod_shape_and_broadcast():
    g = Graph()
    a, b = g.new_tensor("f32", [3, 2, 1, 1]), g.new_tensor("f32", [4, 2, 2, 1])
    t = out_prod(a, b)
    assert t.ne == (3, 4, 2, 1)
    rng = np.random.default_rng(0)
    av, bv = rng.normal(size=(1, 1, 2, 3)), rng.normal(size=(1, 2, 2, 4))
    out = ref_out_prod(t, av, bv)
    for i2 in range(2):   # a's one matrix serves both of b's
        np.testing.assert_allclose(out[0, i2], np.einsum("km,kn->nm", av[0, 0], bv[0, i2]))


def test_row_ids_are_shuffles_of_the_experts():
    case = Case(FAMILIES["mul_mat_id"], dict(type_a="f32", type_b="f32", n_mats=8, n_used=2, b=False,
                                             m=4, n=5, k=3))
    g = case.build()
    (ids,) = [t for t in g.leaves if t.type.name == "i32"]
    rows = init_moe(ids, np.random.default_rng(1), case.params)
    assert rows.shape == (5, 8) and all(sorted(r) == list(range(8)) for r in rows)
    assert g.out.src[2].ne[:2] == (2, 5)   # a view of the first two slots


def test_hadamard_input_is_orthonormal():
    g = Graph()
    a = g.new_tensor("f32", [64, 64], "a")
    h = init_hadamard(a, None, {})
    np.testing.assert_allclose(h @ h.T, np.eye(64), atol=1e-6)
    assert init_hadamard(g.new_tensor("f32", [4, 4], "b"), None, {}) is None


def test_hadamard_signs_follow_the_popcount_over_every_matrix():
    # rows numbered across the matrices (r > ne0), a row length not a power of two, and more
    # rows than one block of the writer (1M elements)
    g = Graph()
    for ne in ([100, 30, 2, 3], [16, 70000]):
        a = g.new_tensor("f32", ne, "a")
        h = init_hadamard(a, None, {})
        r, i = np.divmod(np.arange(h.size), ne[0])
        odd = np.array([bin(x).count("1") % 2 for x in (r & i)]).reshape(h.shape)
        np.testing.assert_array_equal(np.sign(h), np.where(odd, -1.0, 1.0))
        np.testing.assert_array_equal(np.abs(h), np.float32(1) / np.sqrt(np.float32(ne[0])))


def test_catalog():
    names = collections.defaultdict(list)
    for c in cases_of(*OPS):
        names[c.op].append(c.name)
    counts = {op: len(v) for op, v in names.items()}
    assert counts == {"MUL_MAT_ID": 864, "MUL_MAT_ID_FUSION": 13, "OUT_PROD": 1414,
                      "MUL_MAT_HADAMARD": 9, "MUL_MAT_VEC_FUSION": 432}
    assert all(max(collections.Counter(v).values()) == 1 for v in names.values())
    # the fused cases are test mode only
    assert not [c for c in all_cases("support") if c.family.fused and c.op in OPS]
    assert ("MUL_MAT_ID_FUSION(type_a=q4_K,type_b=f32,n_mats=128,n_used=8,b=0,m=768,n=4,k=2048,o=1,mul=1)"
            in names["MUL_MAT_ID_FUSION"])
    had = Case(FAMILIES["mul_mat_hadamard"], FAMILIES["mul_mat_hadamard"].eval_grid()[0]).build()
    assert had.out.op == "MUL_MAT" and had.out.param_i32(1) == 1    # GGML_HINT_SRC0_IS_HADAMARD


# libggml quantizes these types slowly (a search over their grids): kept out of the samples
SLOW_TO_QUANTIZE = {"iq2_xxs", "iq2_xs", "iq2_s", "iq1_s", "iq1_m"}


def _small(cases, limit=300_000):
    return [c for c in cases if sum(t.nelements() for t in c.build().leaves) < limit
            and not SLOW_TO_QUANTIZE & {c.params.get("type_a"), c.params.get("type")}]


@pytest.mark.parametrize("ops,n", [(("MUL_MAT_ID",), 10), (("OUT_PROD",), 8),
                                   (("MUL_MAT_HADAMARD", "MUL_MAT_ID_FUSION"), 3),
                                   (("MUL_MAT_VEC_FUSION",), 6)])
def test_sampled_cases_on_ggml_cpu(ops, n):
    cases = sample(_small(cases_of(*ops)), n)
    assert len(cases) == n
    assert_ok("GGML-CPU", cases, allow_unsupported=True)
