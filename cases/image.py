"""Image-style ops: test_im2col, test_im2col_3d, test_col2im_1d, test_pool1d, test_pool2d,
test_upscale and test_interpolate (both print UPSCALE), and the fused test_snake_fuse.

The constructors below mirror ggml.c (ne and op_params as ggml computes and packs them);
`im2col` is exported for the convolution families, which build on it.
"""
from __future__ import annotations

import itertools

from .catalog import Deviation, Family, fmt_vars, register
from .tolerances import on_310p
from .elementwise import sin, sqr
from .graph import Tensor, add, mul, new_op, set_param, transpose, view
from .inputs import uniform
from .implementations import ACLNN_310P

POOL_MAX, POOL_AVG = 0, 1                       # enum ggml_op_pool
POOL_NAMES = {"max": POOL_MAX, "avg": POOL_AVG}
SCALE_MODES = {"nearest": 0, "bilinear": 1, "bicubic": 2}   # enum ggml_scale_mode
ALIGN_CORNERS, ANTIALIAS = 1 << 8, 1 << 9       # GGML_SCALE_FLAG_*
SCALE_FLAGS = {"align_corners": ALIGN_CORNERS, "antialias": ANTIALIAS}


def scale_mode(name: str) -> int:
    """"bilinear|align_corners" -> mode | flags (test-backend-ops' var_to_str, inverted)."""
    base, *flags = name.split("|")
    value = SCALE_MODES[base]
    for f in flags:
        value |= SCALE_FLAGS[f]
    return value


# --- constructors (ggml.c) ---

def conv_output_size(ins: int, ks: int, s: int, p: int, d: int) -> int:
    """ggml_calc_conv_output_size (C integer division: truncation toward zero)."""
    return int((ins + 2 * p - d * (ks - 1) - 1) / s) + 1


def im2col(a: Tensor, b: Tensor, s0: int, s1: int, p0: int, p1: int, d0: int, d1: int,
           is_2D: bool, dst_type) -> Tensor:
    """ggml_im2col: kernel a {KW, KH, IC, OC} (2-D) / {KW, IC, OC} (1-D), image b {IW, IH, IC, N} /
    {IW, IC, N} -> {IC*KH*KW, OW, OH, N} / {IC*KW, OW, N, 1}; op_params = [s0, s1, p0, p1, d0,
    d1, is_2D]."""
    if is_2D:
        assert a.ne[2] == b.ne[2]
    else:
        assert b.ne[1] == a.ne[1] and b.ne[3] == 1
    oh = conv_output_size(b.ne[1], a.ne[1], s1, p1, d1) if is_2D else 0
    ow = conv_output_size(b.ne[0], a.ne[0], s0, p0, d0)
    assert (not is_2D or oh > 0) and ow > 0, "b too small compared to a"
    ne = ([a.ne[2] * a.ne[1] * a.ne[0], ow, oh, b.ne[3]] if is_2D
          else [a.ne[1] * a.ne[0], ow, b.ne[2], 1])
    return new_op(a.graph, "IM2COL", dst_type, ne, [a, b], i32=[s0, s1, p0, p1, d0, d1, int(is_2D)])


def im2col_3d(a: Tensor, b: Tensor, IC: int, s0, s1, s2, p0, p1, p2, d0, d1, d2, dst_type) -> Tensor:
    """ggml_im2col_3d: kernel a {KW, KH, KD, OC*IC}, image b {IW, IH, ID, N*IC} ->
    {IC*KD*KH*KW, OW, OH, OD*N}; op_params = [s0, s1, s2, p0, p1, p2, d0, d1, d2, IC]."""
    n = b.ne[3] // IC
    od = conv_output_size(b.ne[2], a.ne[2], s2, p2, d2)
    oh = conv_output_size(b.ne[1], a.ne[1], s1, p1, d1)
    ow = conv_output_size(b.ne[0], a.ne[0], s0, p0, d0)
    assert od > 0 and oh > 0 and ow > 0, "b too small compared to a"
    ne = [a.ne[0] * a.ne[1] * a.ne[2] * IC, ow, oh, od * n]
    return new_op(a.graph, "IM2COL_3D", dst_type, ne, [a, b],
                  i32=[s0, s1, s2, p0, p1, p2, d0, d1, d2, IC])


def col2im_1d(a: Tensor, s0: int, oc: int, p0: int) -> Tensor:
    """ggml_col2im_1d: columns {K*OC, T_in} -> {T_out, OC}, T_out = (T_in-1)*s0 + K - 2*p0;
    op_params = [s0, oc, p0]."""
    assert a.ne[2] == a.ne[3] == 1 and a.is_contiguous() and a.type.name in ("f32", "f16", "bf16")
    assert s0 > 0 and oc > 0 and p0 >= 0
    k = a.ne[0] // oc
    t_out = (a.ne[1] - 1) * s0 + k - 2 * p0
    assert a.ne[0] == k * oc and k > 0 and t_out > 0
    return new_op(a.graph, "COL2IM_1D", a.type, [t_out, oc], [a], i32=[s0, oc, p0])


def pool_output_size(ins: int, ks: int, s: int, p: float) -> int:
    """ggml_calc_pool_output_size: computed in float (p is a float), truncated to int64."""
    return int((ins + 2 * p - ks) / s + 1)


def pool_1d(a: Tensor, op: int, k0: int, s0: int, p0: int) -> Tensor:
    """ggml_pool_1d: {IW, ...} -> {OW, ...} f32; op_params = [op, k0, s0, p0]."""
    ne = [pool_output_size(a.ne[0], k0, s0, p0), a.ne[1], a.ne[2], a.ne[3]]
    assert ne[0] > 0
    return new_op(a.graph, "POOL_1D", "f32", ne, [a], i32=[op, k0, s0, p0])


def pool_2d(a: Tensor, op: int, k0: int, k1: int, s0: int, s1: int, p0: float, p1: float) -> Tensor:
    """ggml_pool_2d: {IW, IH, ...} -> {OW, OH, ...} f32; op_params = [op, k0, k1, s0, s1, p0, p1]
    (the float paddings land in int32 words, truncated)."""
    ne = [pool_output_size(a.ne[0], k0, s0, p0), pool_output_size(a.ne[1], k1, s1, p1), a.ne[2], a.ne[3]]
    assert ne[0] > 0 and ne[1] > 0
    return new_op(a.graph, "POOL_2D", "f32", ne, [a], i32=[op, k0, k1, s0, s1, int(p0), int(p1)])


def interpolate(a: Tensor, ne, mode: int) -> Tensor:
    """ggml_interpolate (ggml_interpolate_impl): f32 only; op_params[0] = mode | flags."""
    assert (mode & 0xFF) < len(SCALE_MODES)
    assert not (mode & ANTIALIAS) or (mode & 0xFF) == SCALE_MODES["bilinear"]
    assert a.type.name == "f32"
    return new_op(a.graph, "UPSCALE", a.type, ne, [a], i32=[mode])


def upscale(a: Tensor, scale_factor: int, mode: int) -> Tensor:
    """ggml_upscale: ne0 and ne1 times scale_factor."""
    assert scale_factor > 1
    return interpolate(a, [a.ne[0] * scale_factor, a.ne[1] * scale_factor, a.ne[2], a.ne[3]], mode)


# --- test_im2col ---

def build_im2col(g, type_input, type_kernel, dst_type, ne_input, ne_kernel, s0, s1, p0, p1, d0, d1, is_2D):
    inp = set_param(g.new_tensor(type_input, ne_input, "input"))
    ker = g.new_tensor(type_kernel, ne_kernel, "kernel")
    return im2col(ker, inp, s0, s1, p0, p1, d0, d1, is_2D, dst_type)


IM2COL_VARS = ("type_input", "type_kernel", "dst_type", "ne_input", "ne_kernel",
               "s0", "s1", "p0", "p1", "d0", "d1", "is_2D")


def im2col_case(type_input="f32", type_kernel="f16", dst_type="f32", ne_input=(10, 10, 3, 1),
                ne_kernel=(3, 3, 3, 1), s0=1, s1=1, p0=1, p1=1, d0=1, d1=1, is_2D=True):
    """test_im2col's constructor with its defaults."""
    return dict(type_input=type_input, type_kernel=type_kernel, dst_type=dst_type,
                ne_input=list(ne_input), ne_kernel=list(ne_kernel), s0=s0, s1=s1, p0=p0, p1=p1,
                d0=d0, d1=d1, is_2D=is_2D)


def im2col_eval_grid():
    c = im2col_case
    # 1-D: Whisper's encoder convolutions (3000 mel frames, 128 / 384 channels), then small
    # shapes over stride, padding and dilation
    out = [c("f32", "f32", "f32", [3000, 128, 1, 1], [3, 128, 1280, 1], 1, 0, 1, 0, 1, 0, False),
           c("f32", "f16", "f32", [3000, 128, 1, 1], [3, 128, 1280, 1], 1, 0, 1, 0, 1, 0, False),
           c("f32", "f16", "f16", [3000, 128, 1, 1], [3, 128, 1280, 1], 1, 0, 1, 0, 1, 0, False),
           c("f32", "f16", "f16", [3000, 384, 1, 1], [3, 384, 384, 1], 1, 0, 1, 0, 1, 0, False)]
    for s0, p0, d0 in itertools.product((1, 3), (0, 3), (1, 3)):
        out.append(c("f32", "f32", "f32", [20, 2, 2, 1], [3, 2, 2, 1], s0, 0, p0, 0, d0, 0, False))
    # 2-D: the four type combinations, then every stride / padding / dilation pair
    out += [c("f32", "f32", "f32"), c("f32", "f32", "f16"), c("f32", "f16", "f32"), c("f32", "f16", "f16")]
    for s0, s1, p0, p1, d0, d1 in itertools.product((1, 3), (1, 3), (0, 3), (0, 3), (1, 3), (1, 3)):
        out.append(c("f32", "f32", "f32", [20, 20, 2, 2], [3, 3, 2, 2], s0, s1, p0, p1, d0, d1, True))
    # many images (batch up to 2560), a non-square kernel, a 1x1-output ViT patch case,
    # kernels almost as big as the image
    for n in (32, 1024, 2048, 2560):
        for ic in (1, 2):
            out.append(c("f32", "f16", "f16", [12, 12, ic, n], [3, 3, ic, n], 1, 1, 1, 1, 1, 1, True))
    out += [c("f32", "f16", "f16", [5, 5, 1, 32], [3, 4, 1, 32], 1, 1, 0, 0, 1, 1, True),
            c("f32", "f32", "f32", [2, 2, 1536, 729], [2, 2, 1536, 4096], 1, 1, 0, 0, 1, 1, True),
            c("f32", "f16", "f16", [128, 128, 1, 2], [32, 33, 1, 2], 1, 1, 1, 1, 1, 1, True),
            c("f32", "f16", "f16", [128, 128, 2, 1], [33, 34, 2, 1], 1, 1, 1, 1, 1, 1, True)]
    return out


def im2col_perf_grid():
    # Stable-Diffusion-like 3x3 / 5x5 convolutions over 256 and 2560 channels
    out = []
    for k in (3, 5):
        for ic in (256, 2560):
            for iw in (32, 64, 256):
                if ic == 2560 and iw == 256:
                    continue   # too big, as test-backend-ops says
                out.append(im2col_case("f32", "f16", "f32", [iw, iw, ic, 1], [k, k, ic, 1]))
    return out


register(Family(
    name="im2col",
    build=build_im2col,
    vars=IM2COL_VARS,
    op="IM2COL",
    eval_grid=im2col_eval_grid,
    perf_grid=im2col_perf_grid,
))


# --- test_im2col_3d ---

def build_im2col_3d(g, type_input, type_kernel, dst_type, ne_input, ne_kernel, IC,
                    s0, s1, s2, p0, p1, p2, d0, d1, d2, v):
    inp = set_param(g.new_tensor(type_input, ne_input, "input"))
    if v:   # a view two elements smaller in every dim, keeping the parent's strides
        inp = view(inp, [n - 2 for n in ne_input], inp.nb[1:])
    ker = g.new_tensor(type_kernel, ne_kernel, "kernel")
    return im2col_3d(ker, inp, IC, s0, s1, s2, p0, p1, p2, d0, d1, d2, dst_type)


def im2col_3d_case(type_input="f32", type_kernel="f16", dst_type="f32", ne_input=(10, 10, 10, 9),
                   ne_kernel=(3, 3, 3, 1), IC=3, s0=1, s1=1, s2=1, p0=1, p1=1, p2=1,
                   d0=1, d1=1, d2=1, v=False):
    return dict(type_input=type_input, type_kernel=type_kernel, dst_type=dst_type,
                ne_input=list(ne_input), ne_kernel=list(ne_kernel), IC=IC, s0=s0, s1=s1, s2=s2,
                p0=p0, p1=p1, p2=p2, d0=d0, d1=d1, d2=d2, v=v)


def im2col_3d_eval_grid():
    out = [im2col_3d_case("f32", "f32", "f32"), im2col_3d_case("f32", "f16", "f32"),
           im2col_3d_case("f32", "f16", "f16")]
    # every stride / padding / dilation triple, 1 or 3 input channels, a leaf or a strided
    # view (with IC = 3 the view's 1 plane of ne3 holds no whole image: an empty output)
    for s0, s1, s2, p0, p1, p2, d0, d1, d2, ic, v in itertools.product(
            (1, 3), (1, 3), (1, 3), (0, 3), (0, 3), (0, 3), (1, 3), (1, 3), (1, 3), (1, 3), (False, True)):
        out.append(im2col_3d_case("f32", "f32", "f32", [20, 20, 10, 3], [3, 3, 3, 3], ic,
                                  s0, s1, s2, p0, p1, p2, d0, d1, d2, v))
    return out


register(Family(
    name="im2col_3d",
    build=build_im2col_3d,
    vars=("type_input", "type_kernel", "dst_type", "ne_input", "ne_kernel", "IC",
          "s0", "s1", "s2", "p0", "p1", "p2", "d0", "d1", "d2", "v"),
    op="IM2COL_3D",
    eval_grid=im2col_3d_eval_grid,
))


# --- test_col2im_1d ---

def col2im_1d_case(type, K, OC, T_in, s0, p0):
    return dict(type=type, K=K, OC=OC, T_in=T_in, s0=s0, p0=p0)


register(Family(
    name="col2im_1d",
    build=lambda g, type, K, OC, T_in, s0, p0: col2im_1d(g.new_tensor(type, [K * OC, T_in], "cols"), s0, OC, p0),
    vars=("type", "K", "OC", "T_in", "s0", "p0"),
    op="COL2IM_1D",
    # DAC-style decoder upsampling (ConvTranspose1d as mul_mat + col2im): kernel = 2*stride,
    # no overlap, cropping, gaps (K < stride), uneven overlap, one column, mono, sparse
    # scatter, cropping that leaves 2 samples
    eval_grid=lambda: [col2im_1d_case(t, *shape) for t in ("f32", "f16", "bf16") for shape in (
        (16, 32, 197, 8, 0), (4, 3, 7, 2, 0), (1, 5, 13, 1, 0), (6, 4, 11, 3, 1), (2, 3, 9, 3, 0),
        (5, 4, 11, 2, 0), (8, 4, 13, 4, 2), (4, 3, 1, 2, 0), (16, 1, 197, 8, 0), (1, 5, 13, 3, 0),
        (8, 2, 3, 2, 5))],
    # vocoder stage shapes
    perf_grid=lambda: [col2im_1d_case("f32", 16, 512, 2048, 8, 0), col2im_1d_case("f32", 4, 128, 65536, 2, 0),
                       col2im_1d_case("f16", 16, 512, 2048, 8, 0)],
    max_nmse=lambda p: 1e-7 if p["type"] == "f32" else 5e-4,
))


# --- test_pool1d, test_pool2d ---

# average pooling on the 310P: the layer (as ggml-cann's ASCEND_310P branch) asks
# aclnnAvgPool2d for cubeMathType 1, which the 310P computes in f16 for f32 operands
# (aclnnAvgPool2d's page): inputs rounded to f16 (2^-12 of |x| at most), the window sum and
# quotient in f16; measured at seed 0 up to 3.4e-4 absolute on outputs of RMS ~0.3
AVG_POOL_310P = on_310p(
    "310P average pooling: aclnnAvgPool2d under cubeMathType 1 computes the f32 input in f16 "
    "(operands and window sum rounded to f16)", rtol=2 ** -10, atol_rms=2 ** -8,
    when=lambda p: p["pool_type"] == "avg")
AVG_POOL_310P_NMSE = Deviation(
    "310P: aclnnAvgPool2d under cubeMathType 1 (ggml-cann's ASCEND_310P value, and the layer's) "
    "computes the f32 input in f16, 2^-11 relative per operand: NMSE reaches 1e-7..1.4e-7 "
    "(seed 0, 2- and 3-wide windows), above test-backend-ops' 1e-7",
    when=lambda p: p["pool_type"] == "avg", max_error=1e-6)

register(Family(
    name="pool1d",
    build=lambda g, pool_type, type_input, ne_input, k0, s0, p0: pool_1d(
        set_param(g.new_tensor(type_input, ne_input, "input")), POOL_NAMES[pool_type], k0, s0, p0),
    vars=("pool_type", "type_input", "ne_input", "k0", "s0", "p0"),
    op="POOL_1D",
    # paddings up to 3 with kernels up to 3: windows that lie wholly in the padding
    eval_grid=lambda: [dict(pool_type=pt, type_input="f32", ne_input=ne, k0=k0, s0=s0, p0=p0)
                       for pt in ("avg", "max") for k0 in (1, 2, 3) for s0 in (1, 2, 3)
                       for p0 in (0, 1, 2, 3) for ne in ([10, 3, 2, 1], [11, 1, 3, 2], [128, 2, 1, 3])],
    strict=AVG_POOL_310P,
    notes={ACLNN_310P: AVG_POOL_310P_NMSE},
))

register(Family(
    name="pool2d",
    build=lambda g, pool_type, type_input, ne_input, k0, k1, s0, s1, p0, p1: pool_2d(
        set_param(g.new_tensor(type_input, ne_input, "input")), POOL_NAMES[pool_type], k0, k1, s0, s1, p0, p1),
    vars=("pool_type", "type_input", "ne_input", "k0", "k1", "s0", "s1", "p0", "p1"),
    op="POOL_2D",
    eval_grid=lambda: [dict(pool_type=pt, type_input="f32", ne_input=[10, 10, 3, 1], k0=k0, k1=k1,
                            s0=s0, s1=s1, p0=p0, p1=p1)
                       for pt in ("avg", "max") for k0, k1, s0, s1, p0, p1 in itertools.product(
                           (1, 3), (1, 3), (1, 2), (1, 2), (0, 1), (0, 1))],
    strict=AVG_POOL_310P,
    notes={ACLNN_310P: AVG_POOL_310P_NMSE},
))


# --- test_upscale and test_interpolate: one family, as both print UPSCALE and
# test-backend-ops interleaves them per mode ---

def build_upscale(g, type, ne, mode, scale_factor=None, transpose_a=False, ne_tgt=None):
    a = g.new_tensor(type, ne, "a")
    if ne_tgt is not None:       # test_interpolate
        return interpolate(a, ne_tgt, scale_mode(mode))
    if transpose_a:
        a = transpose(a)
    return upscale(a, scale_factor, scale_mode(mode))


def upscale_vars(p) -> str:
    if "ne_tgt" in p:
        return fmt_vars(p, ("type", "ne", "ne_tgt", "mode"))
    return fmt_vars(p, ("type", "ne", "scale_factor", "mode")) + f",transpose={int(p['transpose_a'])}"


def upscale_eval_grid():
    out = []
    for m in ("nearest", "bilinear", "bicubic", "bilinear|antialias"):
        out += [dict(type="f32", ne=[512, 512, 3, 2], scale_factor=2, mode=m, transpose_a=t) for t in (False, True)]
        # up in every dim, then down
        out += [dict(type="f32", ne=[2, 5, 7, 11], ne_tgt=[5, 7, 11, 13], mode=m),
                dict(type="f32", ne=[5, 7, 11, 13], ne_tgt=[2, 5, 7, 11], mode=m)]
    for m in ("bilinear", "bicubic"):   # align_corners, with 1-wide source and target dims
        for ne, tgt in (([2, 5, 7, 11], [5, 7, 11, 13]), ([1, 4, 3, 2], [2, 8, 3, 2]), ([4, 1, 3, 2], [1, 1, 3, 2])):
            out.append(dict(type="f32", ne=ne, ne_tgt=tgt, mode=m + "|align_corners"))
    return out


register(Family(
    name="upscale",
    build=build_upscale,
    vars=upscale_vars,
    op="UPSCALE",
    eval_grid=upscale_eval_grid,
))


# --- test_snake_fuse: x + sin(a*x)^2 * inv_b, the 5-op chain BigVGAN / Vocos emit ---

def build_snake(g, type, ne):
    x = g.new_tensor(type, ne, "x")
    a = g.new_tensor("f32", [1, ne[1]], "a")
    inv_b = g.new_tensor("f32", [1, ne[1]], "inv_b")
    return add(x, mul(sqr(sin(mul(x, a))), inv_b))


def init_snake(t, rng, p):
    # x in [-pi, pi] to cover sin's period; a and inv_b in [-1, 1]
    return uniform(t, rng, -3.14159, 3.14159) if t.name == "x" else None


SNAKE_SHAPES = ([5, 7, 1, 1], [33, 32, 1, 1], [1025, 13, 1, 1], [128, 16, 1, 1], [256, 192, 1, 1],
                [64, 32, 2, 1], [64, 32, 1, 2], [64, 32, 2, 3])

register(Family(
    name="snake_fuse",
    build=build_snake,
    vars=("type", "ne"),
    op="SNAKE_FUSE",
    fused=True,
    init=init_snake,
    eval_grid=lambda: [dict(type=t, ne=ne) for t in ("f32", "f16", "bf16") for ne in SNAKE_SHAPES],
    perf_grid=lambda: [dict(type=t, ne=[7680, 192, 1, 1]) for t in ("f32", "f16", "bf16")],
    max_nmse=lambda p: {"bf16": 5e-3, "f16": 5e-5}.get(p["type"], 1e-7),
))
