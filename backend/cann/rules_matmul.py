"""Rule of MUL_MAT (native/aclnn/ops_matmul.c), as ggml-cann's supports_op at v0.20.2:
f32 / f16 / bf16 operands through aclnnMm / aclnnMatmul; q4_0 / q8_0 weights through
aclnnWeightQuantBatchMatmulV2 on ggml-cann's upload layout (backend/cann/layout.py), for
contiguous weight and activations only; no other quantized weight type. On 310P
(ggml-cann's ASCEND_310P build) neither bf16 nor q4_0 / q8_0 weights."""
from __future__ import annotations

from .rules import FLOAT, RULES, Rule, no_bf16

QUANT = frozenset({"q4_0", "q8_0"})
MAX_K = 65535   # aclnnWeightQuantBatchMatmulV2's k range (ggml-cann splits only the weight rows)


def ggml_is_contiguous(t) -> bool:
    """ggml_is_contiguous: rows packed one after the other; dims of size 1 may have any stride."""
    expect = t.type.type_size
    if t.ne[0] != t.type.blck_size and t.nb[0] != expect:
        return False
    expect *= t.ne[0] // t.type.blck_size
    for ne, nb in zip(t.ne[1:], t.nb[1:]):
        if ne != 1:
            if nb != expect:
                return False
            expect *= ne
    return True


def quant_layout_ok(node) -> bool:
    # the handler finds the scales region after the weights' own data: a view into a larger
    # tensor (whose scales lie after the whole tensor) is refused
    w = node.src[0]
    return w.type.name not in QUANT or (
        ggml_is_contiguous(w) and ggml_is_contiguous(node.src[1]) and w.view_src is None)


def not_quant(node) -> bool:
    return node.src[0].type.name not in QUANT


# ggml-cann's `#ifdef ASCEND_310P` in supports_op: "Q4 && Q8 per group is not support on
# 310p device" (MUL_MAT and MUL_MAT_ID)
NO_QUANT_310P = (not_quant, "q4_0 / q8_0 src0 on 310P: ggml-cann's ASCEND_310P branch "
                            "(no per-group quantized matmul on the 310P)")


def quant_k_ok(node) -> bool:
    return node.src[0].type.name not in QUANT or node.src[0].ne[0] <= MAX_K


RULES.update({
    "MUL_MAT": Rule(("Cast", "Mm", "Matmul", "WeightQuantBatchMatmulV2"),
                    {"src0": FLOAT | QUANT, "src1": FLOAT, "dst": frozenset({"f32"})},
                    ((quant_layout_ok, "q4_0 / q8_0 src0: ggml-cann takes contiguous src0 and "
                                        "src1 only (and here src0 no view)"),
                     (quant_k_ok, f"q4_0 / q8_0 src0: aclnnWeightQuantBatchMatmulV2 takes k up "
                                   f"to {MAX_K}")),
                    soc={"310P": ((no_bf16, "bf16 src0 on 310P: ggml-cann's ASCEND_310P branch "
                                            "leaves BF16 out of MUL_MAT"),
                                  NO_QUANT_310P)}),
})
