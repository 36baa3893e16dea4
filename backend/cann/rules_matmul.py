"""Rule of MUL_MAT (native/aclnn/ops_matmul.c): aclnnMm / aclnnMatmul on f32, f16 and bf16
operands. ggml-cann's quantized path (Q4_0 / Q8_0 weights through
aclnnWeightQuantBatchMatmulV2 on its own repacked layout) is not in this layer, and
ggml-cann has no MUL_MAT at all for the other quantized types."""
from __future__ import annotations

from .rules import FLOAT, RULES, Rule


def _weight_known(node) -> bool:
    return node.src[0].type.name in FLOAT | {"q4_0", "q8_0"}


def _weight_float(node) -> bool:
    return node.src[0].type.name in FLOAT


RULES.update({
    "MUL_MAT": Rule(("Cast", "Mm", "Matmul"), {"src1": FLOAT, "dst": frozenset({"f32"})},
                    ((_weight_known, "ggml-cann has no MUL_MAT for this quantized src0 type"),
                     (_weight_float, "q4_0 / q8_0 src0: ggml-cann's quantized path "
                                     "(aclnnWeightQuantBatchMatmulV2 on its repacked weight "
                                     "layout) is not realised by this layer"))),
})
