"""IM2COL, IM2COL_3D, COL2IM_1D, POOL_1D, POOL_2D, UPSCALE and SNAKE_FUSE: constructors as
ggml.c builds them, the references on hand-checkable inputs, the catalog, and sampled
cases OK on GGML-CPU."""
import numpy as np
import pytest
from _sample import assert_ok, cases_of, sample

from cannops.backend.reference import image as R
from cannops.cases import FAMILIES, Case, all_cases
from cannops.cases import image as I
from cannops.cases.graph import Graph

FLT_MAX = float(np.finfo(np.float32).max)


def _img(*shape, start=1.0):
    """numpy (.., H, W) image of consecutive values from `start`."""
    return np.arange(start, start + np.prod(shape), dtype=np.float32).reshape(shape)


# --- constructors ---

def test_im2col_shapes_and_op_params():
    g = Graph()
    out = I.im2col(g.new_tensor("f16", [3, 3, 2, 4]), g.new_tensor("f32", [10, 8, 2, 5]), 2, 1, 1, 0, 1, 2, True, "f16")
    # OW = (10 + 2 - 2 - 1) / 2 + 1 = 5, OH = (8 + 0 - 4 - 1) / 1 + 1 = 4
    assert out.ne == (18, 5, 4, 5) and out.type.name == "f16"
    assert [out.param_i32(i) for i in range(7)] == [2, 1, 1, 0, 1, 2, 1]
    one_d = I.im2col(g.new_tensor("f32", [3, 128, 64]), g.new_tensor("f32", [100, 128, 2]), 1, 0, 1, 0, 1, 0, False, "f32")
    assert one_d.ne == (384, 100, 2, 1) and one_d.param_i32(6) == 0
    with pytest.raises(AssertionError):   # channels differ
        I.im2col(g.new_tensor("f32", [3, 3, 2, 1]), g.new_tensor("f32", [10, 10, 3, 1]), 1, 1, 0, 0, 1, 1, True, "f32")


def test_im2col_3d_view_with_no_whole_image_is_empty():
    params = I.im2col_3d_case("f32", "f32", "f32", [20, 20, 10, 3], [3, 3, 3, 3], 3, v=True)
    g = Case(FAMILIES["im2col_3d"], params).build()
    # the view is {18, 18, 8, 1}: 1 // IC = 0 images
    assert g.out.ne[3] == 0 and g.out.ne[:3] == (81, 18, 18)
    assert [g.out.param_i32(i) for i in range(10)] == [1, 1, 1, 1, 1, 1, 1, 1, 1, 3]


def test_col2im_pool_upscale_shapes():
    g = Graph()
    c = I.col2im_1d(g.new_tensor("bf16", [8 * 2, 3]), 2, 2, 5)
    assert c.ne == (2, 2, 1, 1) and c.type.name == "bf16"   # (3-1)*2 + 8 - 10
    p1 = I.pool_1d(g.new_tensor("f32", [10, 3, 2, 1]), I.POOL_AVG, 3, 2, 1)
    assert p1.ne == (5, 3, 2, 1) and [p1.param_i32(i) for i in range(4)] == [1, 3, 2, 1]
    p2 = I.pool_2d(g.new_tensor("f32", [10, 10, 3, 1]), I.POOL_MAX, 3, 1, 2, 1, 1, 0)
    assert p2.ne == (5, 10, 3, 1) and [p2.param_i32(i) for i in range(7)] == [0, 3, 1, 2, 1, 1, 0]
    u = I.upscale(g.new_tensor("f32", [4, 3, 2, 1]), 2, I.scale_mode("bilinear|antialias"))
    assert u.ne == (8, 6, 2, 1) and u.param_i32(0) == 1 | (1 << 9)
    assert I.scale_mode("bicubic|align_corners") == 2 | (1 << 8)


# --- references by hand ---

def test_im2col_reference_2d_and_1d():
    g = Graph()
    node = I.im2col(g.new_tensor("f32", [2, 2, 1, 1]), g.new_tensor("f32", [3, 3, 1, 1]), 1, 1, 0, 0, 1, 1, True, "f32")
    x = _img(1, 1, 3, 3)
    out = R.im2col(node, np.zeros((1, 1, 2, 2)), x)
    assert out.shape == (1, 2, 2, 4)
    np.testing.assert_array_equal(out[0].reshape(4, 4), [[1, 2, 4, 5], [2, 3, 5, 6], [4, 5, 7, 8], [5, 6, 8, 9]])
    # padding 1, stride 2: the first window sees three zeros of padding
    node = I.im2col(g.new_tensor("f32", [2, 2, 1, 1]), g.new_tensor("f32", [3, 3, 1, 1]), 2, 2, 1, 1, 1, 1, True, "f32")
    out = R.im2col(node, np.zeros((1, 1, 2, 2)), x)
    np.testing.assert_array_equal(out[0].reshape(4, 4), [[0, 0, 0, 1], [0, 0, 2, 3], [0, 4, 0, 7], [5, 6, 8, 9]])
    # 1-D, 2 channels, dilation 2: columns (c, k) of positions ow + 2k
    node = I.im2col(g.new_tensor("f32", [2, 2, 1]), g.new_tensor("f32", [5, 2, 1]), 1, 0, 0, 0, 2, 0, False, "f32")
    out = R.im2col(node, np.zeros((1, 2, 2)), _img(1, 1, 2, 5))
    assert out.shape == (1, 1, 3, 4)
    np.testing.assert_array_equal(out[0, 0], [[1, 3, 6, 8], [2, 4, 7, 9], [3, 5, 8, 10]])


def test_im2col_3d_reference_against_loops():
    g = Graph()
    ic, n = 2, 2
    node = I.im2col_3d(g.new_tensor("f32", [2, 2, 2, 3 * ic]), g.new_tensor("f32", [4, 3, 3, n * ic]),
                       ic, 2, 1, 1, 1, 0, 1, 1, 2, 1, "f32")
    x = np.random.default_rng(0).uniform(-1, 1, (n * ic, 3, 3, 4)).astype(np.float32)
    out = R.im2col_3d(node, np.zeros((3 * ic, 2, 2, 2)), x)
    kw = kh = kd = 2
    ow, oh, od = node.ne[1], node.ne[2], node.ne[3] // n
    assert out.shape == (n * od, oh, ow, ic * 8)
    for b in range(n):
        for z in range(od):
            for y in range(oh):
                for w in range(ow):
                    for c in range(ic):
                        for i in range(kd):
                            for j in range(kh):
                                for k in range(kw):
                                    iz, iy, iw = z * 1 + i - 1, y * 1 + j * 2 - 0, w * 2 + k - 1
                                    inside = 0 <= iz < 3 and 0 <= iy < 3 and 0 <= iw < 4
                                    want = x[b * ic + c, iz, iy, iw] if inside else 0
                                    assert out[b * od + z, y, w, c * 8 + i * 4 + j * 2 + k] == want


def test_col2im_overlap_add_and_crop():
    g = Graph()
    node = I.col2im_1d(g.new_tensor("f32", [3 * 2, 3]), 2, 2, 1)   # K = 3, OC = 2, T_in = 3, s = 2
    cols = _img(1, 1, 3, 6)          # row t: [oc0 k0..k2, oc1 k0..k2]
    out = R.col2im_1d(node, cols)
    # uncropped length (3-1)*2 + 3 = 7; position 2 and 4 receive two columns
    full0 = [1, 2, 3 + 7, 8, 9 + 13, 14, 15]
    full1 = [4, 5, 6 + 10, 11, 12 + 16, 17, 18]
    np.testing.assert_array_equal(out, [full0[1:6], full1[1:6]])


def test_pool_1d_counts_only_values_and_max_of_padding_is_minus_flt_max():
    g = Graph()
    x = _img(1, 1, 1, 4)             # [1, 2, 3, 4]
    avg = R.pool_1d(I.pool_1d(g.new_tensor("f32", [4, 1, 1, 1]), I.POOL_AVG, 2, 2, 1), x)
    np.testing.assert_allclose(avg[0, 0, 0], [1, 2.5, 4])     # windows [pad,1], [2,3], [4,pad]
    mx = R.pool_1d(I.pool_1d(g.new_tensor("f32", [4, 1, 1, 1]), I.POOL_MAX, 1, 1, 2), x)
    np.testing.assert_array_equal(mx[0, 0, 0], [-FLT_MAX, -FLT_MAX, 1, 2, 3, 4, -FLT_MAX, -FLT_MAX])
    av0 = R.pool_1d(I.pool_1d(g.new_tensor("f32", [4, 1, 1, 1]), I.POOL_AVG, 1, 1, 1), x)
    np.testing.assert_array_equal(av0[0, 0, 0], [0, 1, 2, 3, 4, 0])


def test_pool_2d_average_divides_by_the_whole_kernel():
    g = Graph()
    x = _img(1, 1, 2, 2)             # [[1, 2], [3, 4]]
    avg = R.pool_2d(I.pool_2d(g.new_tensor("f32", [2, 2, 1, 1]), I.POOL_AVG, 3, 3, 1, 1, 1, 1), x)
    np.testing.assert_allclose(avg[0, 0], np.full((2, 2), 10 / 9))
    mx = R.pool_2d(I.pool_2d(g.new_tensor("f32", [2, 2, 1, 1]), I.POOL_MAX, 2, 1, 1, 2, 0, 0), x)
    np.testing.assert_array_equal(mx[0, 0], [[2]])            # k0=2 along W, k1=1, rows 0 only (s1=2)


def _upscale_node(ne_src, ne_dst, mode):
    g = Graph()
    return I.interpolate(g.new_tensor("f32", ne_src), ne_dst, I.scale_mode(mode))


def test_upscale_nearest_bilinear_and_align_corners_by_hand():
    x = _img(1, 1, 2, 2)             # [[1, 2], [3, 4]]
    near = R.upscale(_upscale_node([2, 2, 1, 1], [4, 4, 1, 1], "nearest"), x)
    np.testing.assert_array_equal(near[0, 0], np.repeat(np.repeat(x[0, 0], 2, 0), 2, 1))
    # half-pixel centres: x = (i + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25 (edges clamped)
    bil = R.upscale(_upscale_node([2, 1, 1, 1], [4, 1, 1, 1], "bilinear"), _img(1, 1, 1, 2))
    np.testing.assert_allclose(bil[0, 0, 0], [1, 1.25, 1.75, 2])
    # align corners: x = i * (2 - 1) / (4 - 1), the end points hit the source's end points
    ac = R.upscale(_upscale_node([2, 1, 1, 1], [4, 1, 1, 1], "bilinear|align_corners"), _img(1, 1, 1, 2))
    np.testing.assert_allclose(ac[0, 0, 0], [1, 4 / 3, 5 / 3, 2], rtol=1e-6)
    # ne2 / ne3 follow nearest: 2 planes -> 4
    planes = R.upscale(_upscale_node([1, 1, 2, 1], [1, 1, 4, 1], "bilinear"), _img(1, 2, 1, 1))
    np.testing.assert_array_equal(planes.reshape(-1), [1, 1, 2, 2])


def test_upscale_bicubic_and_antialias_keep_constants_and_ramps():
    ramp = np.tile(np.arange(8, dtype=np.float32), (1, 1, 2, 1))          # value = x
    # align corners 8 -> 15: x = i / 2; on source pixels the kernel is 1 there and 0 at the
    # other taps, half way it is symmetric, so an (unclamped) ramp comes out exact
    cub = R.upscale(_upscale_node([8, 2, 1, 1], [15, 2, 1, 1], "bicubic|align_corners"), ramp)
    np.testing.assert_allclose(cub[0, 0, 0, 2:12], np.arange(2, 12) / 2, atol=1e-6)
    # half-pixel 8 -> 16, output 4: x = 1.75, taps 0..3 at distances 1.75, 0.75, 0.25, 1.25 of
    # Keys' kernel with a = -0.75
    a = -0.75

    def keys(z):
        z = abs(z)
        return (a + 2) * z**3 - (a + 3) * z**2 + 1 if z <= 1 else a * z**3 - 5 * a * z**2 + 8 * a * z - 4 * a
    x = np.array([0.0, 5.0, -1.0, 2.0, 0, 0, 0, 0], np.float32).reshape(1, 1, 1, 8)
    cub = R.upscale(_upscale_node([8, 1, 1, 1], [16, 1, 1, 1], "bicubic"), x)
    want = sum(keys(1.75 - j) * x[0, 0, 0, j] for j in range(4))
    np.testing.assert_allclose(cub[0, 0, 0, 4], want, rtol=1e-6)
    const = np.full((1, 1, 5, 7), 3.0, np.float32)
    for mode in ("bilinear|antialias", "bicubic|align_corners"):
        down = R.upscale(_upscale_node([7, 5, 1, 1], [2, 3, 1, 1], mode), const)
        np.testing.assert_allclose(down, 3.0, rtol=1e-6)
    # antialias when shrinking 4 -> 2: the triangle filter is 2 source pixels wide; three
    # taps per output, weighted 3:3:1 and 1:3:3
    aa = R.upscale(_upscale_node([4, 1, 1, 1], [2, 1, 1, 1], "bilinear|antialias"), _img(1, 1, 1, 4))
    np.testing.assert_allclose(aa[0, 0, 0], [(1 * 3 + 2 * 3 + 3 * 1) / 7, (2 * 1 + 3 * 3 + 4 * 3) / 7], rtol=1e-6)


# --- catalog ---

def test_catalog_counts_and_names():
    counts = {op: len(cases_of(op)) for op in ("IM2COL", "IM2COL_3D", "COL2IM_1D", "POOL_1D", "POOL_2D",
                                                "UPSCALE", "SNAKE_FUSE")}
    assert counts == {"IM2COL": 92, "IM2COL_3D": 2051, "COL2IM_1D": 33, "POOL_1D": 216, "POOL_2D": 128,
                      "UPSCALE": 22, "SNAKE_FUSE": 24}
    names = {c.name for c in all_cases("test")}
    assert "UPSCALE(type=f32,ne=[512,512,3,2],scale_factor=2,mode=bilinear|antialias,transpose=1)" in names
    assert "UPSCALE(type=f32,ne=[4,1,3,2],ne_tgt=[1,1,3,2],mode=bicubic|align_corners)" in names
    assert not [c for c in all_cases("support") if c.op == "SNAKE_FUSE"]   # fused: test mode only
    assert len(cases_of("IM2COL", "COL2IM_1D", "SNAKE_FUSE", mode="perf")) == 10 + 3 + 3


# --- sampled cases on GGML-CPU ---

def test_sampled_cases_ok_on_ggml_cpu():
    cases = (sample(cases_of("IM2COL"), 6) + sample(cases_of("IM2COL_3D"), 8) + sample(cases_of("COL2IM_1D"), 5)
             + sample(cases_of("POOL_1D"), 6) + sample(cases_of("POOL_2D"), 6) + sample(cases_of("SNAKE_FUSE"), 5)
             + [c for c in cases_of("UPSCALE") if "ne_tgt" in c.params])
    cases = [c for c in cases if "2560" not in c.name and "1024" not in c.name and "3000" not in c.name
             and "1536" not in c.name]   # keep the big im2col cases to `ops test`
    assert_ok("GGML-CPU", cases)
