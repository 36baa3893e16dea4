"""The simulator's operators that only ggml-cann (llama.cpp's ggml/src/ggml-cann) calls:
AddRmsNorm, the in-place Cos / Sin / Exp / Div / Sub / IndexFillTensor / PowTensorTensor,
Permute, and the weight pre-processing aclnnCalculateMatmulWeightSizeV2 +
aclnnTransMatmulWeight read back by aclnnMm; and what older ggml-cann (0.9.5, the Ascend
CI reports' ggml) calls: LogSoftmax, InplaceEqTensor, Ger.

Each operator is called directly (GetWorkspaceSize's checks, then its plan run at once)
and compared with a few lines of NumPy; then one dtype its A2 page refuses
(ACLNN_ERR_PARAM_INVALID) and a nullptr (ACLNN_ERR_PARAM_NULLPTR)."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, sim_fixture  # noqa: E402
from cannops.backend.cann.sim import aclnn, dtypes  # noqa: E402
from cannops.backend.cann.sim.refusals import SimError  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402

INVALID, NULLPTR = 161002, 161001
RNG = np.random.default_rng(7)


def acl(short: str) -> int:
    return dtypes.BY_NAME[short]


class Sim(SimTensors):
    """SimTensors holding given values; scalars and int arrays of any type."""

    def __init__(self):
        super().__init__()
        self.arrays, self.keep = [], []

    def put(self, values, short: str = "f32", strides=None):
        values = np.asarray(values)
        t = self.tensor(list(values.shape), acl(short), strides)
        if values.size:
            self.desc(t).array(write=True)[...] = values.astype(dtypes.numpy_dtype(acl(short)))
        return t

    def desc(self, t):
        return self.state.STATE.tensors.get(t, "t")

    def get(self, t) -> np.ndarray:
        return np.array(self.desc(t).array())

    def scalar(self, value, short: str = "f32"):
        v = np.array([value], dtypes.numpy_dtype(acl(short)))
        self.keep.append(v)
        s = self.meta.aclCreateScalar(ffi.from_buffer(v), acl(short))
        self.scalars.append(s)
        return s

    def ints(self, *v):
        a = self.meta.aclCreateIntArray(ffi.new("int64_t[]", list(v)), len(v))
        self.arrays.append(a)
        return a

    def raw(self, nbytes: int, dims, short: str, strides=None, fmt=lib.ACL_FORMAT_ND, addr=None):
        """A descriptor over an allocation of nbytes (or over addr), storage = its view's span."""
        if addr is None:
            addr = self.state.STATE.memory.malloc(nbytes)
            self.addrs.append(addr)
        if strides is None:
            strides = [int(np.prod(dims[i + 1:], dtype=np.int64)) for i in range(len(dims))]
        span = 1 + sum((d - 1) * s for d, s in zip(dims, strides))
        t = self.meta.aclCreateTensor(ffi.new("int64_t[]", list(dims)), len(dims), acl(short),
                                    ffi.new("int64_t[]", list(strides)), 0, fmt,
                                    ffi.new("int64_t[]", [span]), 1, ffi.cast("void *", addr))
        self.handles.append(t)
        return t, addr

    def close(self):
        for a in self.arrays:
            self.meta.aclDestroyIntArray(a)
        super().close()


sim = sim_fixture(Sim)


def run(name: str, *args) -> None:
    """GetWorkspaceSize's checks, then the plan computed now (inputs read in place)."""
    plan = aclnn.OPS[name](*args)
    plan.staged = [-1] * len(plan.inputs)
    aclnn.execute(plan, 0)


def code(name: str, *args) -> int:
    try:
        aclnn.OPS[name](*args)
    except SimError as e:
        return e.code
    return 0


def half(v):
    """values as FLOAT16 holds them"""
    return np.asarray(v, np.float16).astype(np.float32)


# ------------------------------------------------------------- AddRmsNorm ----

def test_add_rms_norm(sim):
    x1, x2 = RNG.standard_normal((2, 3, 8)), RNG.standard_normal((2, 3, 8))
    g = RNG.standard_normal(8)
    y, rstd, xo = sim.put(np.zeros((2, 3, 8))), sim.put(np.zeros((2, 3, 1))), sim.put(np.zeros((2, 3, 8)))
    run("AddRmsNorm", sim.put(x1), sim.put(x2), sim.put(g), 1e-6, y, rstd, xo)
    x = x1 + x2
    r = 1 / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 1e-6)
    np.testing.assert_allclose(sim.get(xo), x, rtol=1e-6)
    np.testing.assert_allclose(sim.get(rstd), r, rtol=1e-5)
    np.testing.assert_allclose(sim.get(y), x * r * g, rtol=1e-5, atol=1e-6)


def test_add_rms_norm_half_without_rstd(sim):
    """the table's FLOAT16 row with gamma [1, last] and rstdOut / xOut nullptr"""
    x1, x2, g = half(RNG.standard_normal((4, 16))), half(RNG.standard_normal((4, 16))), half(RNG.random((1, 16)))
    y = sim.put(np.zeros((4, 16)), "f16")
    run("AddRmsNorm", sim.put(x1, "f16"), sim.put(x2, "f16"), sim.put(g, "f16"), 1e-5, y, ffi.NULL, ffi.NULL)
    x = x1 + x2
    np.testing.assert_allclose(sim.get(y), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5) * g, rtol=2e-3, atol=2e-3)


def test_add_rms_norm_refusals(sim):
    shape = (2, 8)

    def call(dt="f32", gdt="f32", rstd=True, xout=True, gamma_shape=(8,)):
        return code("AddRmsNorm", sim.put(np.zeros(shape), dt), sim.put(np.zeros(shape), dt),
                    sim.put(np.zeros(gamma_shape), gdt), 1e-6, sim.put(np.zeros(shape), dt),
                    sim.put(np.zeros((2, 1))) if rstd else ffi.NULL,
                    sim.put(np.zeros(shape), dt) if xout else ffi.NULL)
    assert call() == 0
    assert call("f64", "f64") == INVALID              # not in the page's list
    assert call(gdt="f16") == INVALID                 # gamma of x1's type
    assert call(rstd=False, gamma_shape=(1, 8)) == INVALID   # FLOAT32 needs rstdOut
    assert call(rstd=True, xout=False) == NULLPTR     # rstdOut given, xOut nullptr
    assert code("AddRmsNorm", ffi.NULL, sim.put(np.zeros(shape)), sim.put(np.zeros(8)), 1e-6,
                sim.put(np.zeros(shape)), ffi.NULL, ffi.NULL) == NULLPTR


# ------------------------------------------------------ in-place unary ops ----

@pytest.mark.parametrize("name, fn, refused", [
    ("InplaceCos", np.cos, "s32"), ("InplaceSin", np.sin, "f64"), ("InplaceExp", np.exp, "s64")])
def test_inplace_unary(sim, name, fn, refused):
    v = RNG.standard_normal((3, 5))
    t = sim.put(v)
    run(name, t)
    np.testing.assert_allclose(sim.get(t), fn(v), rtol=1e-6)
    h = sim.put(v, "f16")            # a FLOAT16 ref computes in f32, rounded once
    run(name, h)
    np.testing.assert_array_equal(sim.get(h), fn(half(v)).astype(np.float16))
    assert code(name, sim.put(np.zeros(3), refused)) == INVALID
    assert code(name, ffi.NULL) == NULLPTR


# ---------------------------------------------------- in-place binary ops ----

def test_inplace_sub_and_div(sim):
    a, b = RNG.standard_normal((2, 3, 4)), RNG.standard_normal((3, 1)) + 3
    t = sim.put(a)
    run("InplaceSub", t, sim.put(b), sim.scalar(2.0))
    np.testing.assert_allclose(sim.get(t), a - 2 * b, rtol=1e-6)
    t = sim.put(a)
    run("InplaceDiv", t, sim.put(b))
    np.testing.assert_allclose(sim.get(t), a / b, rtol=1e-6)
    # other may not widen selfRef: the broadcast shape must be selfRef's
    assert code("InplaceDiv", sim.put(np.zeros((3, 1))), sim.put(np.zeros((2, 3, 4)))) == INVALID
    assert code("InplaceSub", sim.put(np.zeros(3), "u16"), sim.put(np.zeros(3)), sim.scalar(1.0)) == INVALID
    assert code("InplaceDiv", sim.put(np.zeros(3)), ffi.NULL) == NULLPTR
    assert code("InplaceSub", sim.put(np.zeros(3)), sim.put(np.zeros(3)), ffi.NULL) == NULLPTR


# ------------------------------------------------- InplaceIndexFillTensor ----

def test_inplace_index_fill_tensor(sim):
    v = RNG.standard_normal((2, 3, 6))
    t = sim.put(v)
    run("InplaceIndexFillTensor", t, 2, sim.ints(0, 0, 2, 2, -1), sim.scalar(-1.0))
    want = v.copy()
    want[:, :, [0, 2, 5]] = -1
    np.testing.assert_array_equal(sim.get(t), want.astype(np.float32))
    assert code("InplaceIndexFillTensor", sim.put(np.zeros(4), "f64"), 0, sim.ints(1), sim.scalar(0.0)) == INVALID
    assert code("InplaceIndexFillTensor", sim.put(np.zeros(4)), 0, sim.ints(4), sim.scalar(0.0)) == INVALID
    assert code("InplaceIndexFillTensor", sim.put(np.zeros(4)), 1, sim.ints(0), sim.scalar(0.0)) == INVALID
    assert code("InplaceIndexFillTensor", sim.put(np.zeros(4)), 0, sim.ints(0), ffi.NULL) == NULLPTR


# ------------------------------------------------- InplacePowTensorTensor ----

def test_inplace_pow_tensor_tensor(sim):
    base, e = RNG.random((2, 4)) + 0.5, RNG.standard_normal(4)
    t = sim.put(base)
    run("InplacePowTensorTensor", t, sim.put(e))
    np.testing.assert_allclose(sim.get(t), base ** e, rtol=1e-6)
    t = sim.put([[2, -1, 1, 3]], "s32")
    run("InplacePowTensorTensor", t, sim.put([3, -3, -2, -1], "s32"))
    np.testing.assert_array_equal(sim.get(t), [[8, -1, 1, 0]])
    # FLOAT16 exponent with an INT32 self deduces FLOAT16, which does not convert back
    assert code("InplacePowTensorTensor", sim.put(np.zeros(4), "s32"), sim.put(np.zeros(4), "f16")) == INVALID
    assert code("InplacePowTensorTensor", sim.put(np.zeros(4), "bool"), sim.put(np.zeros(4))) == INVALID
    assert code("InplacePowTensorTensor", sim.put(np.zeros(4)), ffi.NULL) == NULLPTR


# ---------------------------------------------------------------- Permute ----

def test_permute(sim):
    v = RNG.standard_normal((2, 3, 4, 5))
    out = sim.put(np.zeros((2, 3, 5, 4)))
    run("Permute", sim.put(v), sim.ints(0, 1, -1, 2), out)
    np.testing.assert_array_equal(sim.get(out), np.transpose(v, (0, 1, 3, 2)).astype(np.float32))
    assert code("Permute", sim.put(np.zeros((2, 3))), sim.ints(1, 0), sim.put(np.zeros((3, 2)), "f16")) == INVALID
    s4 = acl("s4")                     # the one simulated type its A2 list lacks
    assert code("Permute", sim.tensor([2, 3], s4), sim.ints(1, 0), sim.tensor([3, 2], s4)) == INVALID
    assert code("Permute", sim.put(np.zeros((2, 3))), sim.ints(0, 0), sim.put(np.zeros((2, 2)))) == INVALID
    assert code("Permute", sim.put(np.zeros((2, 3))), ffi.NULL, sim.put(np.zeros((3, 2)))) == NULLPTR


# ---------------------------------------- weights in the private NZ layout ----

def weight_size(shape, short: str) -> int:
    from cannops.backend.cann.sim.runtime import RUNTIME
    out = ffi.new("uint64_t *")
    a = RUNTIME["aclCreateIntArray"](ffi.new("int64_t[]", list(shape)), len(shape))
    try:
        RUNTIME["aclnnCalculateMatmulWeightSizeV2"](a, acl(short), out)
    finally:
        RUNTIME["aclDestroyIntArray"](a)
    return int(out[0])


def test_calculate_matmul_weight_size_v2():
    """the page's examples: [510, 510] FLOAT16 -> 512 * 512, [510, 270] INT8 -> 512 * 288"""
    from cannops.backend.cann.sim.runtime import RUNTIME
    assert weight_size((510, 510), "f16") == 262144
    assert weight_size((510, 270), "s8") == 147456
    assert weight_size((3, 17, 20), "bf16") == 3 * 32 * 32
    for shape, dt in (((510, 510), "f32"), ((7,), "f16"), ((0, 16), "f16")):
        with pytest.raises(SimError) as e:
            weight_size(shape, dt)
        assert e.value.code == INVALID
    with pytest.raises(SimError) as e:
        RUNTIME["aclnnCalculateMatmulWeightSizeV2"](ffi.NULL, acl("f16"), ffi.new("uint64_t *"))
    assert e.value.code == NULLPTR


def test_trans_matmul_weight_then_mm(sim):
    """ggml-cann's pattern: an ND weight (n, k) converted in place, then described to
    aclnnMm as its transpose (k, n) in FRACTAL_NZ; the product is x @ w.T"""
    n, k, m = 20, 40, 3
    w, x = half(RNG.standard_normal((n, k))), half(RNG.standard_normal((m, k)))
    nbytes = weight_size((n, k), "f16") * 2
    nd, addr = sim.raw(nbytes, (n, k), "f16")
    sim.desc(nd).array(write=True)[...] = w
    run("TransMatmulWeight", nd)
    assert sim.desc(nd).format == lib.ACL_FORMAT_FRACTAL_NZ
    raw = np.frombuffer(sim.state.STATE.memory.bytes(addr, nbytes, "w"), np.float16)
    assert not np.array_equal(raw[:n * k].reshape(n, k), w.astype(np.float16))   # the data moved
    nz, _ = sim.raw(0, (k, n), "f16", strides=(1, k), fmt=lib.ACL_FORMAT_FRACTAL_NZ, addr=addr)
    out = sim.put(np.zeros((m, n)))
    run("Mm", sim.put(x, "f16"), nz, out, 0)
    np.testing.assert_allclose(sim.get(out), x @ w.T, rtol=1e-5, atol=1e-5)


def test_trans_matmul_weight_same_handle(sim):
    """the page's sample: the converted aclTensor itself goes to aclnnMm as mat2 (k, n)"""
    k, n = 32, 16
    w, x = half(RNG.standard_normal((k, n))), half(RNG.standard_normal((2, k)))
    mat2, _ = sim.raw(weight_size((k, n), "f16") * 2, (k, n), "bf16")
    sim.desc(mat2).array(write=True)[...] = w
    run("TransMatmulWeight", mat2)
    out = sim.put(np.zeros((2, n)), "bf16")
    run("Mm", sim.put(x, "bf16"), mat2, out, 0)
    np.testing.assert_allclose(sim.get(out).astype(np.float32), x @ w, rtol=1e-2, atol=2e-2)


def test_trans_matmul_weight_refusals(sim):
    # the padded layout needs Align(20, 16) * Align(40, 16) elements: n * k is too few
    short, _ = sim.raw(20 * 40 * 2, (20, 40), "f16")
    assert code("TransMatmulWeight", short) == INVALID
    f32, _ = sim.raw(64 * 64 * 4, (64, 64), "f32")        # not in the A2 list
    assert code("TransMatmulWeight", f32) == INVALID
    one, _ = sim.raw(64 * 2, (64,), "f16")                # 2-6 dims
    assert code("TransMatmulWeight", one) == INVALID
    assert code("TransMatmulWeight", ffi.NULL) == NULLPTR
    # an NZ mat2 reaching past its allocation (never converted with the padded size)
    nz, _ = sim.raw(20 * 40 * 2, (40, 20), "f16", strides=(1, 40), fmt=lib.ACL_FORMAT_FRACTAL_NZ)
    assert code("Mm", sim.put(np.zeros((2, 40)), "f16"), nz, sim.put(np.zeros((2, 20))), 0) == INVALID


# ---------------------------------------- older ggml-cann: LogSoftmax, InplaceEqTensor, Ger ----

def test_log_softmax(sim):
    x = RNG.standard_normal((3, 7)) * 10
    y = sim.put(np.zeros((3, 7)))
    run("LogSoftmax", sim.put(x), 1, y)
    ref = x - x.max(1, keepdims=True)
    ref -= np.log(np.exp(ref).sum(1, keepdims=True))
    np.testing.assert_allclose(sim.get(y), ref, rtol=1e-5, atol=1e-5)
    assert code("LogSoftmax", sim.put(x), 2, sim.put(np.zeros((3, 7)))) == INVALID        # dim out of range
    assert code("LogSoftmax", sim.put(x, "s32"), 1, sim.put(np.zeros((3, 7)))) == INVALID  # not in the list
    assert code("LogSoftmax", sim.put(x), 1, sim.put(np.zeros((7, 3)))) == INVALID         # out's shape
    assert code("LogSoftmax", ffi.NULL, 1, y) == NULLPTR


def test_inplace_eq_tensor(sim):
    a = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    self_ref = sim.put(a)
    run("InplaceEqTensor", self_ref, sim.put(np.array([1, 0, 6], np.float32)))
    np.testing.assert_array_equal(sim.get(self_ref), [[1, 0, 0], [0, 0, 1]])
    # other may broadcast to selfRef, never selfRef to a larger shape
    assert code("InplaceEqTensor", sim.put(np.zeros(3)), sim.put(np.zeros((2, 3)))) == INVALID
    assert code("InplaceEqTensor", sim.put(np.zeros(3), "u16"), sim.put(np.zeros(3), "u16")) == INVALID
    assert code("InplaceEqTensor", ffi.NULL, self_ref) == NULLPTR


def test_ger(sim):
    a, b = RNG.standard_normal(4), RNG.standard_normal(5)
    out = sim.put(np.zeros((4, 5)))
    run("Ger", sim.put(a), sim.put(b), out)
    np.testing.assert_allclose(sim.get(out), np.outer(a, b), rtol=1e-6)
    out16 = sim.put(np.zeros((4, 5)), "f16")
    run("Ger", sim.put(half(a), "f16"), sim.put(half(b), "f16"), out16)
    np.testing.assert_array_equal(sim.get(out16), np.outer(half(a), half(b)).astype(np.float16))
    assert code("Ger", sim.put(a, "bf16"), sim.put(b, "bf16"), sim.put(np.zeros((4, 5)), "bf16")) == INVALID
    assert code("Ger", sim.put(a), sim.put(b), sim.put(np.zeros((5, 4)))) == INVALID      # out's shape
    assert code("Ger", sim.put(np.zeros((2, 2))), sim.put(b), sim.put(np.zeros((2, 5)))) == INVALID  # 1-D
    assert code("Ger", sim.put(a), ffi.NULL, out) == NULLPTR
