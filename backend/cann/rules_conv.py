"""Rules of CONV_TRANSPOSE_1D, CONV_2D and CONV_2D_DW (native/aclnn/ops_conv.c)."""
from __future__ import annotations

from .rules import RULES, Rule

F32 = frozenset({"f32"})


def _fits_forward(node) -> bool:
    """aclnnConvolution refuses a padded input shorter than the dilated kernel (ggml's
    C-style size rule still gives such a case one output of zeros)."""
    kernel, input = node.src
    p = node.params_i32(6)
    return all(input.ne[i] + 2 * p[2 + i] >= p[4 + i] * (kernel.ne[i] - 1) + 1 for i in (0, 1))


def _paddings(node) -> bool:
    return all(0 <= node.param_i32(i) <= 255 for i in (2, 3))


def _forward_2d(what: str) -> Rule:
    return Rule(("Convolution",), {"src0": frozenset({"f32", "f16"}), "src1": F32, "dst": F32},
                ((_fits_forward, f"{what} (beyond ggml-cann, aclnnConvolution): the padded input "
                                 "is smaller than the dilated kernel, which aclnnConvolution refuses"),
                 (_paddings, f"{what} (beyond ggml-cann, aclnnConvolution): padding outside [0, 255]")),
                beyond=f"every case: ggml-cann v0.20.2 has no {what}; one documented aclnnConvolution "
                       "(groups 1, or groups = channels) computes it exactly; f16 kernels are "
                       "promoted to f32")


RULES.update({
    # ggml-cann's supports_op accepts any CONV_TRANSPOSE_1D, but its handler sizes the
    # kernel slices as 4-byte elements: f32 only
    "CONV_TRANSPOSE_1D": Rule(("InplaceZero", "Slice", "Convolution", "ConstantPadNd", "InplaceAdd"),
                              {"src0": F32, "src1": F32, "dst": F32}),
    "CONV_2D": _forward_2d("CONV_2D"),
    "CONV_2D_DW": _forward_2d("CONV_2D_DW"),
})
