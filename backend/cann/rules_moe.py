"""Rules of MUL_MAT_ID and OUT_PROD (native/aclnn/ops_moe.c), after ggml-cann v0.20.2's
supports_op: MUL_MAT_ID for f32 / f16 experts, and q4_0 / q8_0 experts when src0 and src1
are contiguous (ggml-cann's quantized path; not on 310P); OUT_PROD for f32 / f16 src0
(none on 310P: ggml-cann's ASCEND_310P build has no aclnnGer there)."""
from __future__ import annotations

from .rules import RULES, Rule, refused
from .rules_matmul import MAX_K, NO_QUANT_310P, QUANT, quant_k_ok, quant_layout_ok

F32 = frozenset({"f32"})
F16_F32 = frozenset({"f32", "f16"})
MAX_M = 65535   # aclnnWeightQuantBatchMatmulV2's n range: ggml-cann's MUL_MAT_ID does not slice


def _experts_known(node) -> bool:
    return node.src[0].type.name in F16_F32 | QUANT


PREC_F32 = 10   # enum ggml_prec: GGML_PREC_F32


def _no_f32_hint_on_quant(node) -> bool:
    # ggml_prec_set_src(node, GGML_PREC_F32, 1) (op_params[3]): src1 may not be narrowed
    return node.src[0].type.name not in QUANT or node.param_i32(3) != PREC_F32


def _b_pairs(node) -> bool:
    # aclnnBatchMatMul pairs b's rows with the used slots one to one, or broadcasts one row
    return node.src[1].ne[1] in (1, node.src[2].ne[0])


def _quant_m_ok(node) -> bool:
    return node.src[0].type.name not in QUANT or node.src[0].ne[1] <= MAX_M


RULES.update({
    "MUL_MAT_ID": Rule(("IndexSelect", "BatchMatMul", "Cast", "WeightQuantBatchMatmulV2"),
                       {"src1": F16_F32, "src2": frozenset({"i32"}), "dst": F32},
                       ((_experts_known, "ggml-cann has no MUL_MAT_ID for this src0 type"),
                        (quant_layout_ok, "q4_0 / q8_0 src0: ggml-cann takes contiguous src0 and "
                                           "src1 only (and here src0 no view)"),
                        (quant_k_ok, f"q4_0 / q8_0 src0: aclnnWeightQuantBatchMatmulV2 takes k "
                                      f"up to {MAX_K}"),
                        (_b_pairs, "src1 must hold 1 or n_used rows per token")),
                       # ggml-cann claims these: it passes the operator more rows than it
                       # takes; it casts the activations to f16 anyway and returns NaN past
                       # 65504 (docs/ggml-cann-on-cann-sim.md)
                       narrower=((_quant_m_ok, f"q4_0 / q8_0 src0: aclnnWeightQuantBatchMatmulV2 takes m "
                                  f"up to {MAX_M} (one expert's rows are not sliced)"),
                                 (_no_f32_hint_on_quant, "q4_0 / q8_0 src0 with src1 asked in f32 "
                                  "(ggml_prec_set_src): aclnnWeightQuantBatchMatmulV2 takes f16 "
                                  "activations"),),
                       soc={"310P": (NO_QUANT_310P,)}),
    # src1 is not checked by ggml-cann; f32 / f16 are the types aclnnMatmul pairs with src0's
    "OUT_PROD": Rule(("Matmul",), {"src0": F16_F32, "src1": F16_F32, "dst": F32},
                     soc={"310P": refused("on 310P: ggml-cann's ASCEND_310P branch refuses "
                                          "OUT_PROD (\"Ger is not supported on 310p device\")")}),
})
