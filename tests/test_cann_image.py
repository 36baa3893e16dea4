"""IM2COL, POOL_1D, POOL_2D and UPSCALE on CANN-SIM against the NumPy reference; the rules
follow ggml-cann's supports_op (and say where they go beyond it); the simulator's Im2col,
AvgPool2d, MaxPool, UpsampleNearest2d and UpsampleBilinear2d compute what their aclnn
pages say and refuse what they forbid."""
import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from _cann_compare import SimTensors, rejected  # noqa: E402
from _sample import assert_ok, cases_of, sample  # noqa: E402
from cannops.backend.cann.sim import aclnn  # noqa: E402
from cannops.backend.cann.sim import ops_image as ops  # noqa: E402
from cannops.cases.catalog import all_cases  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402


def test_sampled_cases_ok_on_cann_sim():
    small = [c for c in cases_of("IM2COL") if not any(s in c.name for s in ("3000", "1024", "2048", "2560", "1536"))]
    # the upscale of a transposed (non-contiguous) 512x512 source, the one nearest case with
    # the same ne2 / ne3 that is not contiguous
    cases = (sample(small, 8) + sample(cases_of("POOL_1D"), 8) + sample(cases_of("POOL_2D"), 8)
             + [c for c in cases_of("UPSCALE") if c.params["mode"] == "nearest" and c.params.get("transpose_a")]
             + [c for c in cases_of("UPSCALE") if c.params["mode"] == "bilinear|align_corners"][1:2]
             + sample(cases_of("SNAKE_FUSE"), 3))
    results = assert_ok("CANN-SIM", cases, allow_unsupported=True)
    ran = {r.op for r in results if r.status == "OK"}
    assert ran == {"IM2COL", "POOL_1D", "POOL_2D", "UPSCALE", "SNAKE_FUSE"}


def test_one_d_im2col_with_batch_and_f16_output(dev):
    """the 1-D path: three-row aclnnIm2col output, middle row cast into dst's transposed view"""
    names = ["IM2COL(type_input=f32,type_kernel=f32,dst_type=f32,ne_input=[20,2,2,1],ne_kernel=[3,2,2,1],"
             "s0=3,s1=0,p0=3,p1=0,d0=3,d1=0,is_2D=0)",
             "IM2COL(type_input=f32,type_kernel=f16,dst_type=f16,ne_input=[3000,384,1,1],ne_kernel=[3,384,384,1],"
             "s0=1,s1=0,p0=1,p1=0,d0=1,d1=0,is_2D=0)"]
    cases = [c for c in all_cases() if c.name in names]
    assert len(cases) == 2
    assert_ok(dev.name, cases)


def test_rules_follow_supports_op(dev):
    why = {c.name: dev.supports(c, c.build()).reason for c in all_cases() if c.op in ("UPSCALE", "POOL_2D", "POOL_1D")}
    # nearest as ggml-cann; bilinear beyond it (aclnnUpsampleBilinear2d); no bicubic, no antialias
    assert "only nearest" in why["UPSCALE(type=f32,ne=[512,512,3,2],scale_factor=2,mode=bicubic,transpose=0)"]
    assert "only nearest" in why["UPSCALE(type=f32,ne=[512,512,3,2],scale_factor=2,mode=bilinear|antialias,transpose=0)"]
    assert why["UPSCALE(type=f32,ne=[512,512,3,2],scale_factor=2,mode=bilinear,transpose=1)"] == ""
    assert why["UPSCALE(type=f32,ne=[1,4,3,2],ne_tgt=[2,8,3,2],mode=bilinear|align_corners)"] == ""
    assert "output size of 1" in why["UPSCALE(type=f32,ne=[4,1,3,2],ne_tgt=[1,1,3,2],mode=bilinear|align_corners)"]
    assert "ne2 and ne3" in why["UPSCALE(type=f32,ne=[2,5,7,11],ne_tgt=[5,7,11,13],mode=nearest)"]
    assert why["UPSCALE(type=f32,ne=[512,512,3,2],scale_factor=2,mode=nearest,transpose=1)"] == ""
    assert "half the kernel" in why["POOL_2D(pool_type=max,type_input=f32,ne_input=[10,10,3,1],k0=1,k1=3,s0=1,s1=1,p0=1,p1=0)"]
    assert why["POOL_2D(pool_type=max,type_input=f32,ne_input=[10,10,3,1],k0=3,k1=3,s0=2,s1=2,p0=1,p1=1)"] == ""
    # max pooling in 1-D pads explicitly: any padding; average keeps aclnnAvgPool2d's limit
    assert why["POOL_1D(pool_type=max,type_input=f32,ne_input=[10,3,2,1],k0=1,s0=1,p0=3)"] == ""
    assert "half the kernel" in why["POOL_1D(pool_type=avg,type_input=f32,ne_input=[10,3,2,1],k0=2,s0=1,p0=2)"]
    none = [c for c in all_cases() if c.op in ("IM2COL_3D", "COL2IM_1D")][:2]
    assert all("no aclnn mapping" in dev.supports(c, c.build()).reason for c in none)


# --- the simulator's operators, called directly ---

class Sim(SimTensors):
    """SimTensors with a format and data of our own."""

    def tensor_fmt(self, values, fmt, acl_dtype=lib.ACL_FLOAT):
        t = self.tensor(list(values.shape), acl_dtype)
        desc = self.state.STATE.tensors.get(t, "t")
        desc.format = fmt
        if values.size:
            desc.array(write=True)[...] = values
        return t, desc

    def ints(self, *v):
        a = self.meta.aclCreateIntArray(ffi.new("int64_t[]", list(v)), len(v))
        self.arrays.append(a)
        return a


@pytest.fixture
def sim():
    s = Sim()
    s.arrays = []
    yield s
    for a in s.arrays:
        s.meta.aclDestroyIntArray(a)
    s.close()


def _run(plan):
    """compute a prepared plan now (contiguous inputs: nothing staged in a workspace)"""
    plan.staged = [-1] * len(plan.inputs)
    aclnn.execute(plan, 0)


def test_im2col_is_unfold(sim):
    """columns (c, kh, kw) by rows of L = OH * OW blocks, as the page's (N, C*prod(k), L)"""
    x = np.arange(1, 2 * 3 * 4 + 1, dtype=np.float32).reshape(1, 2, 3, 4)
    src, _ = sim.tensor_fmt(x, lib.ACL_FORMAT_ND)
    # kernel (2, 2), dilation (1, 2), padding (0, 1), stride (1, 2): OH = 2, OW = (4 + 2 - 2 - 1) // 2 + 1 = 2
    out, out_d = sim.tensor_fmt(np.zeros((1, 8, 4), np.float32), lib.ACL_FORMAT_ND)
    _run(ops.im2col(src, sim.ints(2, 2), sim.ints(1, 2), sim.ints(0, 1), sim.ints(1, 2), out))
    got = out_d.array()
    xp = np.pad(x, [(0, 0), (0, 0), (0, 0), (1, 1)])
    for c in range(2):
        for i in range(2):
            for j in range(2):
                for oh in range(2):
                    for ow in range(2):
                        assert got[0, c * 4 + i * 2 + j, oh * 2 + ow] == xp[0, c, oh + i, ow * 2 + j * 2]


def test_pools_and_upsample_compute_the_documented_values(sim):
    x = np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    src, _ = sim.tensor_fmt(x, lib.ACL_FORMAT_NCHW)
    # AvgPool2d 3x3, stride 2, padding 1: countIncludePad divides by 9, without it by the
    # values inside (4 at the corner), divisorOverride by itself
    out, out_d = sim.tensor_fmt(np.zeros((1, 1, 2, 2), np.float32), lib.ACL_FORMAT_NCHW)
    for include, override, corner in ((True, 0, (1 + 2 + 5 + 6) / 9), (False, 0, (1 + 2 + 5 + 6) / 4),
                                      (True, 2, (1 + 2 + 5 + 6) / 2)):
        _run(ops.avg_pool2d(src, sim.ints(3), sim.ints(2), sim.ints(1), False, include, override, 0, out))
        assert out_d.array()[0, 0, 0, 0] == pytest.approx(corner)
    # MaxPool 2x2 stride 2, padding (top, left, bottom, right) = (1, 1, 1, 1): padding never wins
    nd, _ = sim.tensor_fmt(-x, lib.ACL_FORMAT_ND)
    mo, mo_d = sim.tensor_fmt(np.zeros((1, 1, 3, 3), np.float32), lib.ACL_FORMAT_ND)
    _run(ops.max_pool(nd, sim.ints(2, 2), sim.ints(2, 2), 0, sim.ints(1, 1, 1, 1), sim.ints(), 0, mo))
    np.testing.assert_array_equal(mo_d.array()[0, 0], [[-1, -2, -4], [-5, -6, -8], [-13, -14, -16]])
    # UpsampleNearest2d 4x4 -> 3x6: src = min(floor(dst * in / out), in - 1)
    up, up_d = sim.tensor_fmt(np.zeros((1, 1, 3, 6), np.float32), lib.ACL_FORMAT_NCHW)
    _run(ops.upsample_nearest2d(src, sim.ints(3, 6), up))
    rows, cols = np.floor(np.arange(3) * 4 / 3).astype(int), np.floor(np.arange(6) * 4 / 6).astype(int)
    np.testing.assert_array_equal(up_d.array()[0, 0], x[0, 0][rows][:, cols])
    # UpsampleBilinear2d 4 -> 8 along W (H kept): max(0, (x + 0.5) * 0.5 - 0.5) = 0, 0.25, 0.75,
    # ..., 3.25 -> the last neighbour clamped to the edge; alignCorners: x * 3 / 7
    bi, bi_d = sim.tensor_fmt(np.zeros((1, 1, 4, 8), np.float32), lib.ACL_FORMAT_NCHW)
    _run(ops.upsample_bilinear2d(src, sim.ints(4, 8), False, 1.0, 2.0, bi))
    np.testing.assert_allclose(bi_d.array()[0, 0, 0], [1, 1.25, 1.75, 2.25, 2.75, 3.25, 3.75, 4])
    _run(ops.upsample_bilinear2d(src, sim.ints(4, 8), True, 0.0, 0.0, bi))
    np.testing.assert_allclose(bi_d.array()[0, 0, 1], 5 + np.arange(8) * 3 / 7, rtol=1e-6)


def test_simulator_refuses_documented_invalid_calls(sim):
    x = np.zeros((1, 2, 6, 6), np.float32)
    nchw, _ = sim.tensor_fmt(x, lib.ACL_FORMAT_NCHW)
    nd, _ = sim.tensor_fmt(x, lib.ACL_FORMAT_ND)
    invalid = lib.ACLNN_ERR_PARAM_INVALID
    # AvgPool2d: padding above half the kernel
    out, _ = sim.tensor_fmt(np.zeros((1, 2, 7, 7), np.float32), lib.ACL_FORMAT_NCHW)
    e = rejected(ops.avg_pool2d, nchw, sim.ints(2), sim.ints(1), sim.ints(2), False, True, 0, 0, out)
    assert e.code == invalid and "half of kernelSize" in str(e)
    # AvgPool2d: FLOAT with ALLOW_FP32_DOWN_PRECISION on Atlas A2/A3
    out, _ = sim.tensor_fmt(np.zeros((1, 2, 6, 6), np.float32), lib.ACL_FORMAT_NCHW)
    e = rejected(ops.avg_pool2d, nchw, sim.ints(3), sim.ints(1), sim.ints(1), False, True, 0, 1, out)
    assert e.code == invalid and "cubeMathType 1" in str(e)
    # MaxPool: dilations other than 1, and an ND-only operator given NCHW
    out, _ = sim.tensor_fmt(np.zeros((1, 2, 5, 5), np.float32), lib.ACL_FORMAT_ND)
    e = rejected(ops.max_pool, nd, sim.ints(2), sim.ints(1), 0, sim.ints(0), sim.ints(2), 0, out)
    assert e.code == invalid and "dilations" in str(e)
    e = rejected(ops.max_pool, nchw, sim.ints(2), sim.ints(1), 0, sim.ints(0), sim.ints(1), 0, out)
    assert e.code == invalid and "should be ND" in str(e)
    # Im2col: out not of the inferred shape; negative padding
    bad, _ = sim.tensor_fmt(np.zeros((1, 18, 15), np.float32), lib.ACL_FORMAT_ND)
    e = rejected(ops.im2col, nd, sim.ints(3, 3), sim.ints(1, 1), sim.ints(0, 0), sim.ints(1, 1), bad)
    assert e.code == invalid and "[1, 18, 16]" in str(e)
    e = rejected(ops.im2col, nd, sim.ints(3, 3), sim.ints(1, 1), sim.ints(-1, 0), sim.ints(1, 1), bad)
    assert e.code == invalid and ">= 0" in str(e)
    # UpsampleNearest2d: N / C must not change, dtypes alike
    up, _ = sim.tensor_fmt(np.zeros((1, 4, 12, 12), np.float32), lib.ACL_FORMAT_NCHW)
    e = rejected(ops.upsample_nearest2d, nchw, sim.ints(12, 12), up)
    assert e.code == invalid and "differ in N or C" in str(e)
    up16, _ = sim.tensor_fmt(np.zeros((1, 2, 12, 12), np.float16), lib.ACL_FORMAT_NCHW, lib.ACL_FLOAT16)
    e = rejected(ops.upsample_nearest2d, nchw, sim.ints(12, 12), up16)
    assert e.code == invalid and "should be the same" in str(e)
    # UpsampleBilinear2d: scales that do not give outputSize; alignCorners to a size of 1
    e = rejected(ops.upsample_bilinear2d, nchw, sim.ints(12, 12), False, 2.5, 2.0,
                 sim.tensor_fmt(np.zeros((1, 2, 12, 12), np.float32), lib.ACL_FORMAT_NCHW)[0])
    assert e.code == invalid and "floor(6 * scale 2.5)" in str(e)
    e = rejected(ops.upsample_bilinear2d, nchw, sim.ints(1, 12), True, 0.0, 0.0,
                 sim.tensor_fmt(np.zeros((1, 2, 1, 12), np.float32), lib.ACL_FORMAT_NCHW)[0])
    assert e.code == invalid and "output size of 1" in str(e)
    # a required int array as nullptr
    e = rejected(ops.upsample_nearest2d, nchw, ffi.NULL, up)
    assert e.code == lib.ACLNN_ERR_PARAM_NULLPTR
