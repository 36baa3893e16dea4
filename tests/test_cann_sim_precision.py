"""The simulator's precision model (docs/cann-sim-dtypes.md, "Precision model"): each test
fails with the model before it (float64 arithmetic, no rounding to a promoted half type,
HF32 as 10 bits with ties to even, no f16 output stage for USE_FP16) and passes with the
one taken from the operators' aclnn pages and Ascend's open op sources."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import sim_fixture  # noqa: E402
from test_cann_sim_ggml_cann_ops import Sim, run  # noqa: E402
from cannops.backend.cann.sim import aclnn, cube, dtypes  # noqa: E402
from cannops.backend.cann.sim.refusals import SimError  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402

RNG = np.random.default_rng(11)
ALLOW_FP32_DOWN_PRECISION, USE_FP16 = 1, 2


sim = sim_fixture(Sim)


def f16(v):
    return np.asarray(v, np.float16).astype(np.float32)


def nmse(a, ref):
    return float(((np.asarray(a, np.float64) - ref) ** 2).sum() / (ref ** 2).sum())


# ------------------------------------------------- promotion to a half type ----

def test_f16_add_into_f32_out_is_the_f16_sum(sim):
    """opbase: compute in the deduced type (FLOAT16), cast that to out (FLOAT)."""
    a, b = f16(RNG.standard_normal(256)), f16(RNG.standard_normal(256))
    out = sim.put(np.zeros(256))
    run("Add", sim.put(a, "f16"), sim.put(b, "f16"), sim.scalar(1.0), out)
    np.testing.assert_array_equal(sim.get(out), f16(a + b))
    assert not np.array_equal(sim.get(out), a + b)   # the exact sum is not what a device gives


def test_integer_operand_is_cast_to_the_promoted_half_type(sim):
    """FLOAT16 with INT32 deduces FLOAT16: 2049 reaches the kernel as 2048."""
    out = sim.put(np.zeros(2))
    run("Mul", sim.put([1.0, 1.0], "f16"), sim.put([2049, 3], "s32"), out)
    np.testing.assert_array_equal(sim.get(out), [2048.0, 3.0])


def test_unary_computes_in_self_type_then_casts_to_out(sim):
    """aclnn_exp.cpp: Exp of self's type, then Cast to out's: an f16 self gives f16 values."""
    x = f16(RNG.uniform(-3, 3, 256))
    out = sim.put(np.zeros(256))
    run("Exp", sim.put(x, "f16"), out)
    np.testing.assert_array_equal(sim.get(out), f16(np.exp(x)))


# -------------------------------------------------------- f32, not f64 ----

def test_rms_norm_computes_in_f32(sim):
    x, g = RNG.standard_normal((8, 300)), RNG.standard_normal(300)
    y, rstd = sim.put(np.zeros((8, 300))), sim.put(np.zeros(8))
    run("RmsNorm", sim.put(x), sim.put(g), 1e-6, y, rstd)
    x32, g32 = x.astype(np.float32).astype(np.float64), g.astype(np.float32).astype(np.float64)
    exact = x32 / np.sqrt((x32 * x32).mean(-1, keepdims=True) + 1e-6) * g32
    e = nmse(sim.get(y), exact)
    assert 0 < e < 1e-12
    assert not np.array_equal(sim.get(y), exact.astype(np.float32))   # float64 rounded once


@pytest.mark.parametrize("op", ["LayerNorm", "GroupNorm", "Softmax"])
def test_norms_compute_in_f32(sim, op):
    x = RNG.standard_normal((4, 8, 64)).astype(np.float32)
    v = x.astype(np.float64)
    out = sim.put(np.zeros(x.shape))
    if op == "LayerNorm":
        run(op, sim.put(x), sim.ints(64), ffi.NULL, ffi.NULL, 1e-5, out, ffi.NULL, ffi.NULL)
        mu = v.mean(-1, keepdims=True)
        exact = (v - mu) / np.sqrt(((v - mu) ** 2).mean(-1, keepdims=True) + 1e-5)
    elif op == "GroupNorm":
        run(op, sim.put(x), ffi.NULL, ffi.NULL, 4, 8, 64, 2, 1e-5, out, sim.put(np.zeros((4, 2))),
            sim.put(np.zeros((4, 2))))
        g = v.reshape(4, 2, -1)
        mu = g.mean(-1, keepdims=True)
        exact = ((g - mu) / np.sqrt(((g - mu) ** 2).mean(-1, keepdims=True) + 1e-5)).reshape(v.shape)
    else:
        run(op, sim.put(x), -1, out)
        e = np.exp(v - v.max(-1, keepdims=True))
        exact = e / e.sum(-1, keepdims=True)
    assert 0 < nmse(sim.get(out), exact) < 1e-12
    assert not np.array_equal(sim.get(out), exact.astype(np.float32))   # float64 rounded once


def test_reduce_sum_accumulates_in_f32(sim):
    """ReduceSum of FLOAT sums in f32: 1e8 + 1 is 1e8 there (float64 would keep the 1)."""
    out = sim.put(np.zeros(1))
    run("ReduceSum", sim.put([1e8, 1.0, -1e8]), sim.ints(0), True, dtypes.BY_NAME["f32"], out)
    assert sim.get(out)[0] == 0.0


def test_sum_halving_order():
    """ReduceSumHalfInterval (ops-nn norm/rms_norm/op_kernel/reduce_common.h): the tail
    past the largest power of two is added onto the head first."""
    t = np.float32(2 ** -24)
    v = np.array([t, 1, t], np.float32)
    assert aclnn.sum_halving(v, (0,)) == np.float32(1 + 2 ** -23)   # (t + t) + 1
    assert np.float32(np.float32(t + 1) + t) == 1                    # in order it would be 1


def test_no_float64_device_side():
    """execute refuses a plan that hands float64 results for tensors of no 64-bit type."""
    s = Sim()
    try:
        t = s.desc(s.put(np.zeros(4)))
        plan = aclnn.Plan(lambda: np.zeros(4, np.float64), [], [t], name="Test")
        with pytest.raises(SimError, match="float64"):
            aclnn.execute(plan, 0)
    finally:
        s.close()


# ----------------------------------------------------------- cube modes ----

def test_hf32_keeps_11_mantissa_bits_rounding_half_away():
    """ops-nn conv/conv2d_v2/tests/assets/golden.py, simulate_hf32_precision for
    "Ascend910B": ((bits >> 11) + 1) >> 1 << 12 (11 mantissa bits, half away from zero)."""
    x = np.array([1 + 2 ** -11, 1 + 2 ** -12, -(1 + 2 ** -12), 1 + 3 * 2 ** -12], np.float32)
    bits = x.view(np.int32)
    golden = (((bits >> 11) + 1) >> 1 << 12).view(np.float32)
    np.testing.assert_array_equal(cube.hf32(x), golden)
    np.testing.assert_array_equal(golden, np.array([1 + 2 ** -11, 1 + 2 ** -11, -(1 + 2 ** -11),
                                                    1 + 2 ** -10], np.float32))
    y = RNG.standard_normal(4096).astype(np.float32)
    np.testing.assert_array_equal(cube.hf32(y), (((y.view(np.int32) >> 11) + 1) >> 1 << 12).view(np.float32))


def test_mm_allow_fp32_down_precision_reads_hf32(sim):
    out = sim.put(np.zeros((1, 1)))
    run("Mm", sim.put([[1 + 2 ** -11]]), sim.put([[1.0]]), out, ALLOW_FP32_DOWN_PRECISION)
    assert sim.get(out)[0, 0] == np.float32(1 + 2 ** -11)   # 10 bits would give 1 or 1 + 2^-10


def test_mm_use_fp16_writes_f16(sim):
    """matmul_util.cpp SetMmSupportDType / Dav2201MatMulRule::UpdateOutputDtype: with
    USE_FP16 the kernel's output type is FLOAT16, cast to a FLOAT out after."""
    a, b = [[1.0, 1.0]], [[1.0], [2 ** -11]]          # both exact in f16; 1 + 2^-11 is not
    for short in ("f32", "f16"):
        out = sim.put(np.zeros((1, 1)))
        run("Mm", sim.put(a, short), sim.put(b, short), out, USE_FP16)
        assert sim.get(out)[0, 0] == 1.0, short
    out = sim.put(np.zeros((1, 1)))   # other modes: a FLOAT out of f16 operands is the f32 sum
    run("Mm", sim.put(a, "f16"), sim.put(b, "f16"), out, ALLOW_FP32_DOWN_PRECISION)
    assert sim.get(out)[0, 0] == np.float32(1 + 2 ** -11)


def test_convolution_use_fp16_writes_f16(sim):
    """aclnn_convolution.cpp UpdateOutputDtype: USE_FP16 makes the output FLOAT16."""
    x = sim.put(np.array([1.0, 2 ** -11]).reshape(1, 2, 1))
    w = sim.put(np.ones((1, 2, 1)))
    y = sim.put(np.zeros((1, 1, 1)))
    for h in (x, w, y):   # put makes ND descriptors; a 1-D convolution wants NCL
        sim.desc(h).format = lib.ACL_FORMAT_NCL
    run("Convolution", x, w, ffi.NULL, sim.ints(1), sim.ints(0), sim.ints(1), False, sim.ints(0), 1, y,
        USE_FP16)
    assert sim.get(y).ravel()[0] == 1.0
