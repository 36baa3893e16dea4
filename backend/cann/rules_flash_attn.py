"""Rule of FLASH_ATTN_EXT (native/aclnn/ops_flash_attn.c), as ggml-cann's supports_op at
v0.20.2 reads: f16 K and V of one head size, no attention sinks, no logit softcap (the
aclnnFusedInferAttentionScoreV2 call has no parameter for either); the output is f32. None
on 310P: ggml-cann's ASCEND_310P branch refuses it, and the operator's page lists no Atlas
inference series."""
from __future__ import annotations

from .rules import RULES, Rule, refused

F16, F32 = frozenset({"f16"}), frozenset({"f32"})


def _no_sinks(node) -> bool:
    return len(node.src) < 5 or node.src[4] is None


def _no_softcap(node) -> bool:
    return node.param_f32(2) == 0.0


def _same_head_size(node) -> bool:
    return node.src[1].ne[0] == node.src[2].ne[0]


def _mask_planes(node) -> bool:
    # ggml-cann repeats the mask over all heads: one mask plane per sequence (or one)
    m = node.src[3]
    return m is None or (m.ne[2] == 1 and m.ne[3] in (1, node.src[0].ne[3]))


def _operator_limits(node) -> bool:
    # aclnnFusedInferAttentionScoreV2: D (padded to 16) <= 512, at most 256 query heads
    # (not checked by ggml-cann; none of test-backend-ops' f16 cases with one head size
    # exceeds them)
    return (node.src[0].ne[0] + 15) // 16 * 16 <= 512 and node.src[0].ne[2] <= 256


RULES.update({
    "FLASH_ATTN_EXT": Rule(("Cast", "ConstantPadNd", "InplaceCopy", "Repeat", "Arange", "PowScalarTensor",
                            "InplaceMul", "FusedInferAttentionScoreV2"),
                           {"src0": F32, "src1": F16, "src2": F16, "dst": F32},
                           ((_no_sinks, "attention sinks are not supported (ggml-cann)"),
                            (_no_softcap, "logit softcap is not supported (ggml-cann)"),
                            (_same_head_size, "K and V head sizes differ (ggml-cann)"),
                            (_mask_planes, "the mask must have one plane per sequence"),
                            (_operator_limits, "head size > 512 or more than 256 heads")),
                           soc={"310P": refused("on 310P: ggml-cann's ASCEND_310P branch refuses "
                                                "FLASH_ATTN_EXT (\"FA not support on 310p device\")")}),
})
