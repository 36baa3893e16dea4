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
        # A2 / A3: BFLOAT16 pairs with nothing but BFLOAT16
        e = rejected(SIM["Mm"], t.tensor([2, 3], BF16), t.tensor([3, 4], F32), t.tensor([2, 4], F32), 1)
        assert e.code == lib.ACLNN_ERR_PARAM_INVALID and "cannot be deduced" in str(e)
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
