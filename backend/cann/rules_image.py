"""CANN rules of IM2COL, POOL_2D, UPSCALE (as ggml-cann v0.20.2's supports_op), and beyond
ggml-cann POOL_1D and bilinear UPSCALE, handled in native/aclnn/ops_image.c.

IM2COL_3D and COL2IM_1D have no ggml-cann mapping and no rule: not supported.
"""
from __future__ import annotations

from .rules import FLOAT, RULES, Rule

F32 = frozenset({"f32"})
POOL_MAX = 0
ALIGN_CORNERS = 1 << 8


def _im2col_image_rows(node) -> bool:
    """aclnnIm2col reads the image through its strides, but ggml's layout puts W innermost."""
    img = node.src[1]
    return img.nb[0] == img.type.type_size


def _im2col_contiguous_dst(node) -> bool:
    return node.is_contiguous()


def _pool2d_padding(node) -> bool:
    """supports_op: paddings at most half the kernel (aclnnAvgPool2d's own limit, applied
    by ggml-cann to max pooling too)."""
    k0, k1, p0, p1 = node.param_i32(1), node.param_i32(2), node.param_i32(5), node.param_i32(6)
    return p0 <= k0 // 2 and p1 <= k1 // 2


def _pool1d_avg_padding(node) -> bool:
    """average: aclnnAvgPool2d takes paddings of at most half the kernel; max pooling pads
    explicitly first (aclnnConstantPadNd) and has no such limit."""
    return node.param_i32(0) == POOL_MAX or 2 * node.param_i32(3) <= node.param_i32(1)


def _mode_mapped(node) -> bool:
    """supports_op: op_params[0] == GGML_SCALE_MODE_NEAREST, flags included (no
    align_corners, no antialias). Beyond ggml-cann v0.20.2: bilinear, with or without
    align_corners, is aclnnUpsampleBilinear2d's sampling; antialias and bicubic have no
    aclnn equivalent of ggml's definition."""
    mode = node.param_i32(0)
    return mode == 0 or mode in (1, 1 | ALIGN_CORNERS)


def _aligned_sizes(node) -> bool:
    """aclnnUpsampleBilinear2d's align-corners scale (in-1)/(out-1) is undefined for an
    output size of 1 (ggml then falls back to out/in)."""
    return not node.param_i32(0) & ALIGN_CORNERS or (node.ne[0] > 1 and node.ne[1] > 1)


def _same_n_c(node) -> bool:
    """aclnnUpsampleNearest2d keeps N and C: ne2 and ne3 must not change. ggml-cann's
    supports_op only compares their ratios (src ne2 * dst ne3 == src ne3 * dst ne2), which
    also lets through cases aclnn refuses (e.g. 3x2 -> 6x4)."""
    src = node.src[0]
    return src.ne[2] == node.ne[2] and src.ne[3] == node.ne[3]


def _not_max(node) -> bool:
    return node.param_i32(0) != POOL_MAX


_MAX_ONLY = {"MaxPool": lambda node, soc: not _not_max(node)}


RULES.update({
    # aclnnIm2col into scratch, then aclnnInplaceCopy / aclnnCast into dst's transposed view
    "IM2COL": Rule(("Im2col", "InplaceCopy", "Cast"), {"src1": FLOAT, "dst": FLOAT},
                   ((_im2col_image_rows, "the image needs unit element stride"),
                    (_im2col_contiguous_dst, "dst must be contiguous"))),
    # avg: aclnnAvgPool2d (count_include_pad); max: aclnnConstantPadNd (-FLT_MAX) + aclnnMaxPool
    "POOL_2D": Rule(("AvgPool2d", "ConstantPadNd", "MaxPool"), {"src0": F32, "dst": F32},
                    ((_pool2d_padding, "paddings must be at most half the kernel"),),
                    soc={"310P": ((_not_max, "max pooling on 310P: ggml-cann's ASCEND_310P branch "
                                             "refuses it (aclnnMaxPool's page: Atlas inference "
                                             "series not supported)"),)},
                    calls=_MAX_ONLY),
    "POOL_1D": Rule(("AvgPool2d", "ConstantPadNd", "MaxPool"), {"src0": F32, "dst": F32},
                    ((_pool1d_avg_padding, "average pooling: padding must be at most half the kernel"),),
                    calls=_MAX_ONLY,
                    beyond="every case: ggml-cann v0.20.2 has no POOL_1D; the POOL_2D operators over "
                           "1-row images, the average without count_include_pad (ggml's 1-D "
                           "average divides by the values in the window)"),
    # nearest: aclnnUpsampleNearest2d, as ggml-cann
    "UPSCALE": Rule(("UpsampleNearest2d", "UpsampleBilinear2d"), {"src0": F32, "dst": F32},
                    ((_mode_mapped, "only nearest (ggml-cann) and bilinear (beyond ggml-cann), no antialias"),
                     (_same_n_c, "ne2 and ne3 must not change (aclnn keeps N and C)"),
                     (_aligned_sizes, "align_corners to an output size of 1")),
                    beyond="bilinear: ggml-cann v0.20.2 maps nearest only; aclnnUpsampleBilinear2d "
                           "is documented for it (align_corners as ggml's flag)",
                    beyond_when=lambda node: node.param_i32(0) != 0),
})
