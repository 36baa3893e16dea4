"""Convolutions: test_conv_2d (CONV_2D), test_conv_2d_dw (CONV_2D_DW), test_conv_3d
(CONV_3D), test_conv_transpose_1d (CONV_TRANSPOSE_1D) and test_conv_transpose_2d
(CONV_TRANSPOSE_2D), with ggml's direct constructors (one op node each; no im2col); and
test_conv_1d_dw (CONV_1D_DW, 0.25.3), whose constructor is an im2col and a matrix product."""
from __future__ import annotations

import numpy as np

from .catalog import Deviation, Family, new_params, register, Since, unique_params
from .tolerances import CANN_CUBE_F32, CUBE_F16_310P, dot_products
from .graph import Tensor, cont, new_op, permute, reshape, view
from .image import im2col
from .matmul import mul_mat
from .types import F16, F32
from .implementations import ACLNN_310P


def _cdiv(a: int, b: int) -> int:
    """C's integer division (truncates toward zero), as ggml.c computes sizes."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def conv_out(ins: int, ks: int, s: int, p: int, d: int) -> int:
    """ggml_calc_conv_output_size. Truncation toward zero makes a padded input a little
    shorter than the dilated kernel still give one output (of zeros taps only)."""
    return _cdiv(ins + 2 * p - d * (ks - 1) - 1, s) + 1


def is_contiguous_channels(t: Tensor) -> bool:
    """ggml_is_contiguous_channels: a {W, H, C, N} tensor stored channels-first (CWHN)."""
    return t.nb[0] > t.nb[2] and t.nb[1] > t.nb[0] and t.nb[2] == t.type.type_size


def conv_2d_direct(a: Tensor, b: Tensor, s0, s1, p0, p1, d0, d1) -> Tensor:
    """ggml_conv_2d_direct: kernel a {KW, KH, IC, OC}, input b {W, H, IC, N} -> {OW, OH, OC, N}
    in b's type; op_params = [s0, s1, p0, p1, d0, d1] (index 0: the W axis)."""
    assert a.ne[2] == b.ne[2]
    ne = [conv_out(b.ne[0], a.ne[0], s0, p0, d0), conv_out(b.ne[1], a.ne[1], s1, p1, d1), a.ne[3], b.ne[3]]
    return new_op(b.graph, "CONV_2D", b.type, ne, [a, b], i32=[s0, s1, p0, p1, d0, d1])


def conv_2d_dw_direct(a: Tensor, b: Tensor, s0, s1, p0, p1, d0, d1) -> Tensor:
    """ggml_conv_2d_dw_direct: kernel a {KW, KH, 1, C}, input b {W, H, C, N} -> {OW, OH, C, N}
    in b's type, stored CWHN (channels innermost) when b is; op_params as CONV_2D's."""
    assert a.ne[2] == 1 and a.ne[3] == b.ne[2]
    ne = [conv_out(b.ne[0], a.ne[0], s0, p0, d0), conv_out(b.ne[1], a.ne[1], s1, p1, d1), b.ne[2], b.ne[3]]
    t = new_op(b.graph, "CONV_2D_DW", b.type, ne, [a, b], i32=[s0, s1, p0, p1, d0, d1])
    if is_contiguous_channels(b):
        size = t.type.type_size
        t.nb = (ne[2] * size, ne[0] * ne[2] * size, size, t.nb[3])
    return t


def conv_3d_direct(a: Tensor, b: Tensor, s0, s1, s2, p0, p1, p2, d0, d1, d2, c, n, oc) -> Tensor:
    """ggml_conv_3d_direct: kernel a {KW, KH, KD, IC*OC}, input b {W, H, D, IC*N} ->
    f32 {OW, OH, OD, OC*N} (channel index innermost in the 4th dim: n*IC + ic);
    op_params = [s0, s1, s2, p0, p1, p2, d0, d1, d2, IC, N, OC]."""
    assert a.ne[3] == c * oc and b.ne[3] == c * n
    ne = [conv_out(b.ne[i], a.ne[i], s, p, d) for i, (s, p, d) in enumerate(((s0, p0, d0), (s1, p1, d1), (s2, p2, d2)))]
    return new_op(b.graph, "CONV_3D", F32, ne + [oc * n], [a, b],
                  i32=[s0, s1, s2, p0, p1, p2, d0, d1, d2, c, n, oc])


def conv_transpose_1d(a: Tensor, b: Tensor, s0: int, p0: int, d0: int) -> Tensor:
    """ggml_conv_transpose_1d: kernel a {K, OC, IC}, input b {L, IC} -> f32 {(L-1)*s0 + K, OC, 1};
    only p0 = 0 and d0 = 1 exist; op_params = [s0, p0, d0]."""
    assert b.ne[2] == b.ne[3] == 1 and a.ne[2] == b.ne[1] and a.ne[3] == 1
    assert p0 == 0 and d0 == 1
    ne = [(b.ne[0] - 1) * s0 + a.ne[0], a.ne[1], b.ne[2], 1]
    return new_op(b.graph, "CONV_TRANSPOSE_1D", F32, ne, [a, b], i32=[s0, p0, d0])


def conv_transpose_2d_p0(a: Tensor, b: Tensor, stride: int) -> Tensor:
    """ggml_conv_transpose_2d_p0: kernel a {KW, KH, OC, IC}, input b {W, H, IC, N} ->
    f32 {(W-1)*s + KW, (H-1)*s + KH, OC, N}; op_params = [stride]."""
    assert a.ne[3] == b.ne[2]
    ne = [(b.ne[0] - 1) * stride + a.ne[0], (b.ne[1] - 1) * stride + a.ne[1], a.ne[2], b.ne[3]]
    return new_op(b.graph, "CONV_TRANSPOSE_2D", F32, ne, [a, b], i32=[stride])


def _cwhn(g, input: Tensor, kernel: Tensor) -> tuple[Tensor, Tensor]:
    """test-backend-ops' cwhn=1: both stored channels-innermost (a CONT of a permute), then
    permuted back so that ne is unchanged and only nb differs."""
    input = permute(cont(permute(input, 1, 2, 0, 3)), 2, 0, 1, 3)
    kernel = permute(cont(permute(kernel, 2, 3, 1, 0)), 3, 2, 0, 1)
    return input, kernel


# ---------------------------------------------------------------- CONV_2D ----

def new_kernel(g, type_kernel, ne, kernel_offset=0):
    """The kernel; 0.25.3's kernel_offset: a contiguous view that many elements into a 1-d
    storage, as a kernel packed in a weights buffer."""
    if not kernel_offset:
        return g.new_tensor(type_kernel, ne, "kernel")
    storage = g.new_tensor(type_kernel, [int(np.prod(ne)) + kernel_offset], "kernel_storage")
    es = storage.type.type_size
    kernel = view(storage, ne, [ne[0] * es, ne[0] * ne[1] * es, ne[0] * ne[1] * ne[2] * es], kernel_offset * es)
    kernel.name = "kernel"
    return kernel


def build_conv_2d(g, ne_input, ne_kernel, type_kernel, stride0, stride1, padding0, padding1,
                  dilation0, dilation1, cwhn, kernel_offset=0):
    input, kernel = g.new_tensor("f32", ne_input, "input"), new_kernel(g, type_kernel, ne_kernel, kernel_offset)
    if cwhn:
        input, kernel = _cwhn(g, input, kernel)
    return conv_2d_direct(kernel, input, stride0, stride1, padding0, padding1, dilation0, dilation1)


def conv_2d_params(ne_input, ne_kernel, type_kernel, s0=1, s1=1, p0=0, p1=0, d0=1, d1=1, cwhn=False):
    return dict(ne_input=list(ne_input), ne_kernel=list(ne_kernel), type_kernel=type_kernel,
                stride0=s0, stride1=s1, padding0=p0, padding1=p1, dilation0=d0, dilation1=d1, cwhn=cwhn)


def conv_2d_eval_grid():
    # every size class (1 or large; kernels 1..11) under strided, padded and dilated axes
    # that differ between W and H, so that a swapped axis shows
    s1, p0, d0, d1 = 5, 5, 2, 4
    cases = []
    for s0 in (1, 3):
        for p1 in (2, 5):
            for cin in (1, 25):
                for cout in (1, 12):
                    for kh in (1, 2, 3, 11):
                        for kw in (1, 2, 3, 11):
                            for h in (1, 133):
                                for w in (1, 141):
                                    if conv_out(w, kw, s0, p0, d0) <= 0 or conv_out(h, kh, s1, p1, d1) <= 0:
                                        continue
                                    for kt in ("f32", "f16"):
                                        for cwhn in (False, True):
                                            cases.append(conv_2d_params([w, h, cin, 2], [kw, kh, cin, cout], kt,
                                                                        s0, s1, p0, p1, d0, d1, cwhn))
    for kt in ("f32", "f16"):   # one realistic layer
        for cwhn in (False, True):
            cases.append(conv_2d_params([256, 256, 192, 1], [3, 3, 192, 96], kt, 1, 1, 1, 1, 1, 1, cwhn))
    return cases


def conv_2d_perf_grid():
    # {IWH, KWH, Cout, Cin, B}: a K = CRS = NPQ = 4096 matmul, small-K variants, ConvNet layers
    shapes = ((19, 4, 4096, 256, 16), (19, 4, 128, 8, 16), (19, 4, 130, 8, 16), (19, 2, 4, 4, 16),
              (224, 3, 8, 3, 1), (224, 2, 8, 1, 1), (224, 2, 8, 1, 8), (58, 3, 64, 32, 1),
              (58, 3, 64, 32, 8), (16, 3, 512, 128, 8), (1536, 3, 64, 32, 1))
    return [conv_2d_params([iwh, iwh, cin, b], [kwh, kwh, cin, cout], kt, cwhn=cwhn)
            for kt in ("f32", "f16") for iwh, kwh, cout, cin, b in shapes for cwhn in (False, True)]


def conv_2d_flops(out, p):
    """test-backend-ops counts the im2col matmul, K x NPQ x (2 CRS - 1), with the stride,
    padding and dilation of axis 0 for both axes (its own shortcut, kept)."""
    w, h, _, n = p["ne_input"]
    kw, kh, cin, cout = p["ne_kernel"]
    s, pad, d = p["stride0"], p["padding0"], p["dilation0"]
    npq = n * conv_out(h, kh, s, pad, d) * conv_out(w, kw, s, pad, d)
    return cout * npq * (2 * cin * kh * kw - 1)


register(Family(
    name="conv_2d",
    strict=dot_products(lambda p: p["type_kernel"]) + CUBE_F16_310P,
    build=build_conv_2d,
    vars=("ne_input", "ne_kernel", "type_kernel", "stride0", "stride1", "padding0", "padding1",
          "dilation0", "dilation1", "cwhn"),
    op="CONV_2D",
    changes=(new_params("0.25.3", ("ne_input", "ne_kernel", "type_kernel", "stride0", "stride1", "padding0",
                                     "padding1", "dilation0", "dilation1", "cwhn"), kernel_offset=0, add=lambda: [
        conv_2d_params([19, 17, 8, 2], [3, 3, 8, 65], "f16", 1, 1, 1, 1, 1, 1),
        conv_2d_params([19, 17, 16, 3], [3, 3, 16, 33], "f16", 2, 3, 4, 2, 2, 1),
        conv_2d_params([13, 11, 16, 3], [1, 1, 16, 33], "f16", 1, 1, 0, 0, 1, 1),
        dict(conv_2d_params([19, 17, 8, 2], [3, 3, 8, 17], "f16", 1, 1, 1, 1, 1, 1), kernel_offset=1)]),),
    eval_grid=conv_2d_eval_grid,
    perf_grid=conv_2d_perf_grid,
    max_nmse=5e-4,
    flops=conv_2d_flops,
))


# ------------------------------------------------------------- CONV_2D_DW ----

def build_conv_2d_dw(g, ne_input, ne_kernel, type_kernel, stride, padding, dilation, cwhn):
    input, kernel = g.new_tensor("f32", ne_input, "input"), g.new_tensor(type_kernel, ne_kernel, "kernel")
    if cwhn:
        input, kernel = _cwhn(g, input, kernel)
    return conv_2d_dw_direct(kernel, input, stride, stride, padding, padding, dilation, dilation)


def _dw(ne_input, ne_kernel, type_kernel, stride, padding, dilation, cwhn):
    return dict(ne_input=ne_input, ne_kernel=ne_kernel, type_kernel=type_kernel, stride=stride,
                padding=padding, dilation=dilation, cwhn=cwhn)


register(Family(
    name="conv_2d_dw",
    strict=dot_products(lambda p: p["type_kernel"]) + CUBE_F16_310P,
    build=build_conv_2d_dw,
    vars=("ne_input", "ne_kernel", "type_kernel", "stride", "padding", "dilation", "cwhn"),
    op="CONV_2D_DW",
    # odd sizes unpadded, and a strided padded layer with 64 channels (a SIMD-wide CWHN path)
    eval_grid=lambda: [_dw(i, k, kt, s, p, 1, cwhn) for kt in ("f32", "f16")
                       for i, k, s, p in (([17, 34, 9, 1], [3, 3, 1, 9], 1, 0), ([32, 8, 64, 1], [3, 3, 1, 64], 2, 1))
                       for cwhn in (False, True)],
    # MobileNet-style depth-wise layers
    perf_grid=lambda: [_dw(i, k, "f32", s, p, 1, cwhn) for i, k, s, p in (
        ([512, 512, 256, 1], [3, 3, 1, 256], 1, 1), ([112, 112, 32, 1], [3, 3, 1, 32], 1, 1),
        ([56, 56, 128, 1], [5, 5, 1, 128], 2, 2)) for cwhn in (False, True)],
))


# ------------------------------------------------------------- CONV_1D_DW ----

def conv_1d_dw(a: Tensor, b: Tensor, s0: int, p0: int, d0: int) -> Tensor:
    """ggml_conv_1d_dw: kernel a {K, 1, C, 1}, data b {T, C, N} -> {OW, C, N}: b seen as
    {T, 1, C, N}, its columns (IM2COL, f32 for a bf16 kernel, else f16) times each
    channel's kernel row (MUL_MAT, the kernel as src1)."""
    columns = im2col(a, reshape(b, [b.ne[0], 1, b.ne[1], b.ne[2]]), s0, 0, p0, 0, d0, 0, False,
                     F32 if a.type.name == "bf16" else F16)
    out = mul_mat(columns, a)
    return reshape(out, [out.ne[0], out.ne[2], 1])


def build_conv_1d_dw(g, ne_input, ne_kernel, type_kernel, stride, padding, dilation):
    return conv_1d_dw(g.new_tensor(type_kernel, ne_kernel, "kernel"), g.new_tensor(F32, ne_input, "input"),
                      stride, padding, dilation)


register(Family(
    name="conv_1d_dw",
    # the product's src0 is the columns (f16 but for a bf16 kernel), into whose type
    # backends convert the kernel; on CANN an f32 product runs on the cube as MUL_MAT's
    strict=dot_products(lambda p: "f32" if p["type_kernel"] == "bf16" else "f16") + (CANN_CUBE_F32,),
    build=build_conv_1d_dw,
    vars=("ne_input", "ne_kernel", "type_kernel", "stride", "padding", "dilation"),
    op="CONV_1D_DW",
    since="0.25.3",
    # a 3-tap and a padded 7-tap layer, and an odd one: strided, padded, dilated
    eval_grid=lambda: [dict(ne_input=i, ne_kernel=k, type_kernel=kt, stride=s, padding=p, dilation=d)
                       for kt in ("f32", "f16", "bf16") for i, k, s, p, d in (
                           ([64, 16, 1, 1], [3, 1, 16, 1], 1, 0, 1), ([64, 16, 1, 1], [7, 1, 16, 1], 1, 3, 1),
                           ([97, 33, 1, 1], [5, 1, 33, 1], 2, 2, 2))],
    max_nmse=5e-4,
))


# ---------------------------------------------------------------- CONV_3D ----

CONV_3D_VARS = ("N", "IC", "ID", "IH", "IW", "OC", "KD", "KH", "KW", "s0", "s1", "s2",
                "p0", "p1", "p2", "d0", "d1", "d2", "type_kernel")


def build_conv_3d(g, N, IC, ID, IH, IW, OC, KD, KH, KW, s0, s1, s2, p0, p1, p2, d0, d1, d2, type_kernel,
                  kernel_offset=0):
    input = g.new_tensor("f32", [IW, IH, ID, IC * N], "input")
    kernel = new_kernel(g, type_kernel, [KW, KH, KD, IC * OC], kernel_offset)
    return conv_3d_direct(kernel, input, s0, s1, s2, p0, p1, p2, d0, d1, d2, IC, N, OC)


def _c3(N, IC, ID, IH, IW, OC, KD, KH, KW, s, p, d, kt):
    return dict(zip(CONV_3D_VARS, (N, IC, ID, IH, IW, OC, KD, KH, KW, *s, *p, *d, kt)))


def _fits_3d(c) -> bool:
    return all(conv_out(c[i], c[k], c[s], c[p], c[d]) > 0 for i, k, s, p, d in (
        ("IW", "KW", "s0", "p0", "d0"), ("IH", "KH", "s1", "p1", "d1"), ("ID", "KD", "s2", "p2", "d2")))


def conv_3d_eval_grid():
    cases = []
    for kt in ("f32", "f16"):
        for n in (1, 2):
            for ic in (1, 3):
                for oc in (1, 4):
                    for s in (1, 2):
                        for p in (0, 1):
                            for d in (1, 2):
                                c = _c3(n, ic, 18, 22, 20, oc, 3, 3, 3, (s,) * 3, (p,) * 3, (d,) * 3, kt)
                                if not _fits_3d(c):
                                    continue
                                cases.append(c)
                                # an asymmetric kernel, stride, padding and dilation
                                c = _c3(n, ic, 18, 22, 20, oc, 3, 1, 5, (2, 1, 1), (2, 0, 1), (1, 1, 2), kt)
                                if _fits_3d(c):
                                    cases.append(c)
        cases.append(_c3(1, 4, 8, 8, 8, 8, 1, 1, 1, (1, 1, 1), (0, 0, 0), (1, 1, 1), kt))   # 1x1x1 kernel
    return unique_params(cases)


def conv_3d_flops(out, c):
    od, oh, ow = (conv_out(c[i], c[k], c[s], c[p], c[d]) for i, k, s, p, d in (
        ("ID", "KD", "s2", "p2", "d2"), ("IH", "KH", "s1", "p1", "d1"), ("IW", "KW", "s0", "p0", "d0")))
    return c["N"] * c["OC"] * od * oh * ow * (2 * c["IC"] * c["KD"] * c["KH"] * c["KW"] - 1)


register(Family(
    name="conv_3d",
    strict=dot_products(lambda p: p["type_kernel"]),
    build=build_conv_3d,
    vars=CONV_3D_VARS,
    changes=(new_params("0.25.3", CONV_3D_VARS, kernel_offset=0, add=lambda: [
        _c3(*a, kt) for kt in ("f32", "f16") for a in (
            (2, 8, 5, 11, 9, 65, 3, 3, 3, (1, 1, 1), (1, 1, 1), (1, 1, 1)),
            (2, 5, 7, 9, 13, 17, 2, 3, 4, (2, 1, 3), (3, 2, 2), (2, 1, 2)),
            (3, 16, 3, 7, 9, 33, 1, 1, 1, (1, 1, 1), (0, 0, 0), (1, 1, 1)),
            (2, 8, 7, 5, 9, 33, 3, 1, 1, (1, 1, 2), (0, 0, 2), (1, 1, 2)),
            (2, 3, 1, 2, 1, 7, 1, 1, 1, (1, 1, 1), (3, 4, 2), (1, 1, 1)),
            # empty kernels along one axis
            (1, 1, 2, 2, 2, 1, 1, 1, 0, (1, 1, 1), (0, 0, 0), (1, 1, 1)),
            (1, 1, 2, 2, 2, 1, 1, 0, 1, (1, 1, 1), (0, 0, 0), (1, 1, 1)),
            (1, 1, 2, 2, 2, 1, 0, 1, 1, (1, 1, 1), (0, 0, 0), (1, 1, 1)))] + [
        dict(_c3(2, 8, 5, 7, 9, 17, 3, 3, 3, (1, 1, 1), (1, 1, 1), (1, 1, 1), kt), kernel_offset=1)
        for kt in ("f32", "f16")]),),
    op="CONV_3D",
    eval_grid=conv_3d_eval_grid,
    # 3x3x3 layers of 320 / 1280 channels over 8 frames at three resolutions
    perf_grid=lambda: [_c3(1, ic, 8, ih, iw, 1280, 3, 3, 3, (1,) * 3, (1,) * 3, (1,) * 3, kt)
                       for kt in ("f32", "f16") for ic, ih, iw in (
                           (320, 38, 26), (1280, 38, 26), (320, 76, 52), (1280, 76, 52), (320, 152, 104))],
    max_nmse=5e-4,
    flops=conv_3d_flops,
))


# ------------------------------------------------------ CONV_TRANSPOSE_1D ----

def build_conv_transpose_1d(g, ne_input, ne_kernel, s0, p0, d0):
    input = g.new_tensor("f32", ne_input, "input")
    kernel = g.new_tensor("f32", ne_kernel, "kernel")
    return conv_transpose_1d(kernel, input, s0, p0, d0)


def conv_transpose_1d_eval_grid():
    cases = [dict(ne_input=[l, cin, 1, 1], ne_kernel=[k, cout, cin, 1], s0=s, p0=0, d0=1)
             for cout in (1, 9) for cin in (1, 7) for k in (1, 3, 1337) for l in (1, 2, 13) for s in (1, 2, 3)]
    # the default (a 16-tap upsampler over 197 samples) and small hand-checkable ones
    cases.append(dict(ne_input=[197, 32, 1, 1], ne_kernel=[16, 32, 32, 1], s0=1, p0=0, d0=1))
    for ne_input, ne_kernel, s in (([3, 2, 1, 1], [2, 3, 2, 1], 3), ([3, 2, 1, 1], [2, 3, 2, 1], 2),
                                   ([3, 2, 1, 1], [2, 3, 2, 1], 1), ([3, 2, 1, 1], [3, 2, 2, 1], 2),
                                   ([3, 2, 1, 1], [3, 2, 2, 1], 1), ([3, 2, 1, 1], [3, 1, 2, 1], 1),
                                   ([2, 1, 1, 1], [3, 1, 1, 1], 1)):
        cases.append(dict(ne_input=ne_input, ne_kernel=ne_kernel, s0=s, p0=0, d0=1))
    return unique_params(cases)


register(Family(
    name="conv_transpose_1d",
    strict=dot_products(lambda p: "f32"),
    build=build_conv_transpose_1d,
    vars=("ne_input", "ne_kernel", "s0", "p0", "d0"),
    op="CONV_TRANSPOSE_1D",
    eval_grid=conv_transpose_1d_eval_grid,
    notes={ACLNN_310P: Deviation(reason=(
        "310P: ggml-cann's 310P path (and the layer's) runs aclnnConvolution with cubeMathType 1, "
        "which the 310P computes in f16 for f32 operands (aclnnConvolution's page): both operands "
        "are rounded to f16 (2^-11 relative), so NMSE reaches 1e-7..2.3e-6 (17 of 115 cases at "
        "seed 0, the worst with 7 input channels cancelling), above test-backend-ops' 1e-7"),
        max_error=1e-5)},
))


# ------------------------------------------------------ CONV_TRANSPOSE_2D ----

def build_conv_transpose_2d(g, kernel_type, ne_input, ne_kernel, stride):
    input = g.new_tensor("f32", ne_input, "input")
    kernel = g.new_tensor(kernel_type, ne_kernel, "kernel")
    return conv_transpose_2d_p0(kernel, input, stride)


def _ct2(shapes):
    return [dict(kernel_type=kt, ne_input=i, ne_kernel=k, stride=s) for kt in ("f32", "f16") for i, k, s in shapes]


register(Family(
    name="conv_transpose_2d",
    strict=dot_products(lambda p: p["kernel_type"]),
    build=build_conv_transpose_2d,
    vars=("kernel_type", "ne_input", "ne_kernel", "stride"),
    op="CONV_TRANSPOSE_2D",
    eval_grid=lambda: _ct2((([3, 2, 3, 1], [2, 2, 1, 3], 1), ([10, 10, 9, 1], [3, 3, 1, 9], 2),
                            ([129, 63, 35, 1], [3, 3, 48, 35], 1))),
    changes=(Since("0.25.3", add=lambda: _ct2((([10, 10, 9, 2], [3, 3, 1, 9], 2),))),),   # a batch of 2
    # a decoder upsampling stage, a small one, and the stride-2 eval shape
    perf_grid=lambda: _ct2((([256, 256, 256, 1], [3, 3, 16, 256], 1), ([16, 16, 16, 1], [3, 3, 8, 16], 1),
                            ([10, 10, 9, 1], [3, 3, 1, 9], 2))),
    max_nmse=5e-4,
))
