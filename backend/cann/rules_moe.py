"""Rules of MUL_MAT_ID and OUT_PROD (native/aclnn/ops_moe.c), after ggml-cann v0.20.2's
supports_op: MUL_MAT_ID for f32 / f16 experts (q4_0 / q8_0 take ggml-cann's quantized path,
not realised here yet), OUT_PROD for f32 / f16 src0."""
from __future__ import annotations

from .rules import RULES, Rule

F32 = frozenset({"f32"})
F16_F32 = frozenset({"f32", "f16"})


def _experts_known(node) -> bool:
    return node.src[0].type.name in F16_F32 | {"q4_0", "q8_0"}


def _experts_float(node) -> bool:
    return node.src[0].type.name in F16_F32


def _b_pairs(node) -> bool:
    # aclnnBatchMatMul pairs b's rows with the used slots one to one, or broadcasts one row
    return node.src[1].ne[1] in (1, node.src[2].ne[0])


RULES.update({
    "MUL_MAT_ID": Rule(("IndexSelect", "BatchMatMul"),
                       {"src1": F16_F32, "src2": frozenset({"i32"}), "dst": F32},
                       ((_experts_known, "ggml-cann has no MUL_MAT_ID for this src0 type"),
                        (_experts_float, "q4_0 / q8_0 experts: ggml-cann's quantized path "
                                         "(aclnnWeightQuantBatchMatmulV2) is to be done in this layer"),
                        (_b_pairs, "src1 must hold 1 or n_used rows per token"))),
    # src1 is not checked by ggml-cann; f32 / f16 are the types aclnnMatmul pairs with src0's
    "OUT_PROD": Rule(("Matmul",), {"src0": F16_F32, "src1": F16_F32, "dst": F32}),
})
