"""MUL_MAT with f32 / f16 / bf16 operands on CANN-SIM against the NumPy reference (batch
broadcast, permuted and strided operands, the fused o > 1 sum), which quantized weights are
supported, and the aclnnMm / aclnnMatmul rules and cube precision of the simulator."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, check_cases, nmse, rejected, run_graph  # noqa: E402
from cannops.cases.catalog import all_cases  # noqa: E402
from cannops.cases.graph import Graph  # noqa: E402
from cannops.cases.matmul import mul_mat  # noqa: E402
from cannops.native._aclnn import lib  # noqa: E402


@pytest.fixture(scope="module")
def cases():
    return {c.name: c for c in all_cases() if c.op == "MUL_MAT"}


def mm(ta, tb, m, n, k, bs, nr, per="[0,1,2,3]", k_v=0, o=1):
    return (f"MUL_MAT(type_a={ta},type_b={tb},m={m},n={n},k={k},bs={bs},nr={nr},per={per},"
            f"k_v={k_v},o={o})")


def test_cases_match_the_reference(dev, cases):
    names = [
        mm("f32", "f32", 16, 1, 256, "[1,1]", "[1,1]"),                 # aclnnMm
        mm("f16", "f32", 16, 16, 256, "[3,2]", "[2,2]"),                # Matmul, 6 dims
        mm("f16", "f16", 16, 1, 256, "[3,2]", "[1,2]"),
        mm("f32", "f16", 16, 16, 4, "[2,3]", "[1,1]", "[0,3,2,1]"),     # permuted operands
        mm("bf16", "f32", 16, 8, 256, "[2,3]", "[1,1]", "[0,2,1,3]"),   # bf16 converted to f32
        mm("bf16", "f32", 16, 1, 256, "[1,1]", "[1,1]"),
        mm("f16", "f32", 1056, 1, 67, "[1,1]", "[4,1]", "[0,2,1,3]"),
        mm("bf16", "f32", 128, 1, 1057, "[2,3]", "[4,1]", k_v=2113),    # rows longer than k
        mm("f32", "f32", 16, 32, 32, "[1,1]", "[1,1]", k_v=64, o=3),      # three products summed
    ]
    assert check_cases(dev, cases, names) == len(names)


def test_which_quantized_weights_are_supported(dev, cases):
    # q4_0 / q8_0 as ggml-cann: contiguous operands only (tests/test_cann_quant.py runs them)
    q4 = cases[mm("q4_0", "f32", 16, 1, 256, "[1,1]", "[1,1]")]
    assert dev.supports(q4, q4.build())
    q4p = cases[mm("q4_0", "f32", 16, 1, 256, "[2,3]", "[1,1]", "[0,2,1,3]")]
    why = dev.supports(q4p, q4p.build())
    assert not why and "contiguous src0 and src1 only" in why.reason
    q2 = cases[mm("q2_K", "f32", 16, 1, 256, "[1,1]", "[1,1]")]
    assert "src0 type q2_K not in" in dev.supports(q2, q2.build()).reason


def test_bf16_times_bf16(dev):
    # both bf16: no conversion, aclnnMm with ALLOW_FP32_DOWN_PRECISION (USE_FP16 refuses bf16)
    g = Graph()
    a, b = g.new_tensor("bf16", [64, 5], "a"), g.new_tensor("bf16", [64, 7], "b")
    g.out = mul_mat(a, b)
    rng = np.random.default_rng(4)
    inputs = {t.index: rng.uniform(-1, 1, tuple(reversed(t.ne))).astype(t.type.dtype) for t in (a, b)}
    got, ref = run_graph(dev, g, inputs)
    assert nmse(got, ref) < 1e-10


def test_documented_refusals_and_cube_precision():
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    t = SimTensors()
    try:
        F32, F16, BF16 = lib.ACL_FLOAT, lib.ACL_FLOAT16, lib.ACL_BF16
        # A2 / A3: BFLOAT16 with FLOAT32 deduces FLOAT32 (ops-nn's rule table, not
        # aclnnMatmul's page), under USE_FP16 both sides go to FLOAT16: tested below
        assert SIM["Mm"](t.tensor([2, 3], BF16), t.tensor([3, 4], F32), t.tensor([2, 4], F32), 1)
        assert "USE_FP16" in str(rejected(SIM["Mm"], t.tensor([2, 3], BF16), t.tensor([3, 4], BF16),
                                          t.tensor([2, 4], BF16), 2))
        assert "USE_HF32" in str(rejected(SIM["Matmul"], t.tensor([2, 3], F16), t.tensor([3, 4], F16),
                                          t.tensor([2, 4], F16), 3))
        assert "k-axis" in str(rejected(SIM["Mm"], t.tensor([2, 3], F32), t.tensor([4, 4], F32),
                                        t.tensor([2, 4], F32), 0))
        assert "broadcast" in str(rejected(SIM["Matmul"], t.tensor([2, 2, 3], F32), t.tensor([3, 3, 4], F32),
                                           t.tensor([3, 2, 4], F32), 0))
        # the cube's input rounding: 1 + 2^-12 survives KEEP_DTYPE only
        x, w = np.array([[1 + 2.0 ** -12]], np.float32), np.ones((1, 1), np.float32)
        args = (t.tensor([1, 1], F32), t.tensor([1, 1], F32), t.tensor([1, 1], F32))
        exact = SIM["Mm"](*args, 0).compute(x, w)
        assert exact[0, 0] == x[0, 0]
        # HF32 on 910B (1, 3) keeps 11 mantissa bits, a tie rounding away from zero (ops-nn
        # conv/conv2d_v2/tests/assets/golden.py); f16 (2) rounds it to even
        for cube, rounded in ((1, 1 + 2.0 ** -11), (2, 1.0), (3, 1 + 2.0 ** -11)):
            assert SIM["Mm"](*args, cube).compute(x, w)[0, 0] == np.float32(rounded), cube
    finally:
        t.close()


def test_bf16_with_f32_follows_the_rule_table():
    """ops-nn matmul_util.cpp's A2 table, row FP32+BF16: KEEP_DTYPE / USE_FP32_ADD compute in
    f32, ALLOW_FP32_DOWN_PRECISION / USE_HF32 round the f32 side to HF32 (bf16 values are
    exact there), USE_FP16 casts both sides to f16 and the kernel writes f16."""
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    t = SimTensors()
    try:
        args = (t.tensor([1, 2], lib.ACL_BF16), t.tensor([2, 1], lib.ACL_FLOAT), t.tensor([1, 1], lib.ACL_FLOAT))
        x = np.array([[1 + 2.0 ** -7, 2.0 ** -14]], np.float32)     # exact in bf16
        w = np.array([[1 + 2.0 ** -12], [1.0]], np.float32)         # exact in f32 only
        keep = (1 + 2.0 ** -7) * (1 + 2.0 ** -12) + 2.0 ** -14      # exact in f32
        hf32 = (1 + 2.0 ** -7) * (1 + 2.0 ** -11) + 2.0 ** -14      # w's tie away from zero
        f16 = 1 + 2.0 ** -7                                         # w -> 1, the sum -> f16
        for cube, want in ((0, keep), (4, keep), (1, hf32), (3, hf32), (2, f16)):
            assert SIM["Mm"](*args, cube).compute(x, w)[0, 0] == want, cube
        big = np.array([[2.0 ** 17, 0.0]], np.float32)               # a bf16 past f16's range
        ones = np.ones((2, 1), np.float32)
        assert SIM["Mm"](*args, 0).compute(big, ones)[0, 0] == 2.0 ** 17
        assert np.isinf(SIM["Mm"](*args, 2).compute(big, ones)[0, 0])
    finally:
        t.close()


def test_layer_cast_matches_the_mixed_call():
    """The layer converts a bf16 operand to f32 (exact) before aclnnMm / aclnnMatmul, where
    ggml-cann hands the mixed pair over: the products agree bit for bit in every mode the
    two pass (USE_FP16 for Mm, ALLOW_FP32_DOWN_PRECISION for Matmul)."""
    import ml_dtypes
    from cannops.backend.cann.sim.aclnn import OPS as SIM
    t = SimTensors()
    try:
        rng = np.random.default_rng(7)
        w = rng.uniform(-3, 3, (64, 9)).astype(ml_dtypes.bfloat16)
        x = rng.uniform(-3, 3, (5, 64)).astype(np.float32)
        F32, BF16 = lib.ACL_FLOAT, lib.ACL_BF16
        out = t.tensor([5, 9], F32)
        for name, cube in (("Mm", 2), ("Matmul", 1), ("Mm", 0)):
            mixed = SIM[name](t.tensor([5, 64], F32), t.tensor([64, 9], BF16), out, cube).compute(x, w)
            cast = SIM[name](t.tensor([5, 64], F32), t.tensor([64, 9], F32), out, cube).compute(
                x, w.astype(np.float32))
            assert np.array_equal(np.asarray(mixed), np.asarray(cast)), (name, cube)
    finally:
        t.close()
