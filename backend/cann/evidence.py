"""How sure a CANN verdict is: the evidence level of each answer of the rules per SoC, from
facts whose source each names (ggml-cann 0.25.3's code, the Ascend CI's 910B report; the
aclnn pages' offers are soc.py's, beside the operators the 310P refuses).

No public device result exists for the 310P (the Ascend CI's nightly runs on a 910B; its
310P runners run only by manual dispatch and publish nothing). So a verdict rests on:

* device run (910B): the Ascend CI's 910B report passes the op (its cases ran there), or
  its run refused what ggml-cann's supports_op refuses;
* device path (310P): code ggml-cann wrote for the 310P (`#ifdef ASCEND_310P`): the op's
  handler has a 310P path, or such code calls every aclnn operator the node runs, or
  supports_op's 310P branch refuses the node;
* page alone: the aclnn pages offer what the node runs, and nothing more (no device run,
  no device path); a path beyond ggml-cann; on the 910B an op the CI does not pass; with
  --soc-evidence pages, an operator refused by its page where its source offers it;
* build claims it (310P): ggml-cann's 310P build calls an operator whose page does not offer
  the Atlas inference series (不支持, or no row), with no 310P-specific code; or its
  supports_op refuses the node on every SoC;
* page and source agree (310P, refused): the page does not offer the operator and its
  kernel registration leaves the 310P out (soc.UNOFFERED), or the 310P has no BFLOAT16.

An accepted case is as sure as its least sure node, a node as its least sure operator; a
refused one as the surest reason that refuses it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .refusal import Failed, Refusal
from .soc import DEFAULT, PAGES_WITHOUT_310P, UNOFFERED, page_refusal, unoffered

if TYPE_CHECKING:
    from cannops.cases.graph import Tensor

DEVICE_RUN, DEVICE_PATH, PAGE_ALONE, BUILD_CLAIMS, PAGE_AND_SOURCE = (
    "device run", "device path", "page alone", "build claims it", "page and source agree")
LEVELS = (DEVICE_RUN, DEVICE_PATH, PAGE_ALONE, BUILD_CLAIMS, PAGE_AND_SOURCE)   # surest first

GGML_CANN = "ggml-cann 0.25.3 (llama-cpp-python 0.3.36)"

# The aclnn operators ggml-cann 0.25.3 calls (src/ggml-cann/aclnn_ops.cpp, ggml-cann.cpp:
# GGML_CANN_CALL_ACLNN_OP, GGML_CANN_CALL_OP_UNARY[_GATED]); its 310P build calls each of
# them but those of refused ops. Checked against the sources where they are unpacked.
GGML_CANN_CALLS = frozenset({
    "Abs", "Add", "AddRmsNorm", "Arange", "ArgMax", "Argsort", "AvgPool2d", "BatchMatMul", "Cast", "Cat",
    "Clamp", "ClampMin", "ConstantPadNd", "Convolution", "Cos", "Cumsum", "Div", "Elu", "EqTensor", "Exp",
    "FusedInferAttentionScoreV2", "GatherV2", "GeGluV3", "Gelu", "GeluV2", "GroupNorm", "GtScalar",
    "Hardsigmoid", "Hardswish", "Im2col", "IndexSelect", "InplaceAdd", "InplaceAdds", "InplaceClampMax",
    "InplaceCopy", "InplaceCos", "InplaceDiv", "InplaceDivs", "InplaceExp", "InplaceFillScalar",
    "InplaceIndexCopy", "InplaceIndexFillTensor", "InplaceMul", "InplaceMuls", "InplacePowTensorTensor",
    "InplaceSin", "InplaceSub", "InplaceSubs", "InplaceThreshold", "InplaceTriu", "InplaceZero", "LayerNorm",
    "LeakyRelu", "Log", "Matmul", "MaxPool", "Mean", "Mm", "Mul", "Muls", "Mv", "Neg", "Norm", "Permute",
    "PowScalarTensor", "ReduceSum", "ReflectionPad1d", "Relu", "Repeat", "RepeatInterleaveIntWithDim",
    "RmsNorm", "Roll", "RotaryPositionEmbedding", "Sigmoid", "Sign", "Silu", "Sin", "Slice", "Softmax",
    "SoftmaxCrossEntropyWithLogits", "Softplus", "Sqrt", "Sub", "SwiGlu", "Tanh", "TriangularSolve", "Tril",
    "Triu", "UpsampleNearest2d", "WeightQuantBatchMatmulV2",
})

_ROPE_310P = f"{GGML_CANN} aclnn_ops.cpp, ggml_cann_rope's #ifdef ASCEND_310P rotation"
# operator -> the code ggml-cann wrote for the 310P that calls it (#ifdef ASCEND_310P)
DEVICE_PATHS_310P: dict[str, str] = {
    "Roll": f"{_ROPE_310P} (aclnn_roll: the rotated halves or pairs)",
    "InplaceIndexFillTensor": f"{_ROPE_310P} (aclnn_index_fill_tensor: the -1 signs of normal mode)",
    "InplaceZero": f"{_ROPE_310P} (aclnn_values: the sign vector)",
    "InplaceAdds": f"{_ROPE_310P} (aclnn_values: the sign vector)",
    "InplaceMuls": f"{_ROPE_310P} (aclnn_muls in place: NeoX's -1 half)",
    "Mul": f"{_ROPE_310P} (aclnn_mul into a buffer: rolled x by the signs, by sin / cos)",
    "InplaceMul": f"{_ROPE_310P} (aclnn_mul in place: x by cos)",
    "Add": f"{_ROPE_310P} (aclnn_add: the two products)",
    "Cast": f"{_ROPE_310P} (aclnn_cast: the f32 sum to an f16 dst)",
    "AvgPool2d": f"{GGML_CANN} aclnn_ops.cpp, ggml_cann_avg_pool2d: cube_math_type = 1 #ifdef ASCEND_310P",
    "Convolution": f"{GGML_CANN} aclnn_ops.cpp, ggml_cann_conv_transpose_1d and ggml_cann_ssm_conv: "
                   f"cubeMathType = 1 #ifdef ASCEND_310P",
}

# ggml op -> its ggml-cann handler with a path of its own on the 310P: the whole handler, as
# the 310P build runs it, was written for that SoC (ops' handler takes the same path)
DEVICE_PATH_OPS_310P: dict[str, str] = {
    "ROPE": f"{_ROPE_310P}: sin / cos cache, then aclnnRoll, aclnnInplaceIndexFillTensor or aclnnInplaceMuls, "
            f"aclnnMul, aclnnAdd (and aclnnCast for f16)",
    "POOL_2D": DEVICE_PATHS_310P["AvgPool2d"],
    "CONV_TRANSPOSE_1D": DEVICE_PATHS_310P["Convolution"],
    "SSM_CONV": DEVICE_PATHS_310P["Convolution"],
}

# The Ascend CI's nightly 910B report (Ascend910B1, shared/reference/ci-summary-example-b.md,
# llama.cpp of about 2026-01-25): its ✅ ops ran every case on the device and passed;
# of its 🟡 ops, those where ggml-cann supports some cases ran those and passed (no FAIL in
# the report; which ones from its replay at the same ggml, docs/ascend-ci-replay.md), the
# others ran none. Checked against both files by tests/test_cann_evidence.py.
CI_REPORT = "the Ascend CI's 910B report (ci-summary-example-b, ggml 0.9.5-102)"
CI_SUPPORTED = frozenset({
    "ABS", "ACC", "ADD", "ADD1", "ARANGE", "ARGMAX", "ARGSORT", "CLAMP", "CONCAT", "CONV_TRANSPOSE_1D", "COS",
    "COUNT_EQUAL", "CROSS_ENTROPY_LOSS", "DIAG_MASK_INF", "DIV", "DUP", "ELU", "EXP", "GATED_LINEAR_ATTN",
    "GEGLU", "GEGLU_ERF", "GEGLU_QUICK", "GELU", "GELU_ERF", "GELU_QUICK", "GROUP_NORM", "HARDSIGMOID",
    "HARDSWISH", "IM2COL", "L2_NORM", "LEAKY_RELU", "LOG", "MEAN", "MUL", "NEG", "NORM", "PAD_REFLECT_1D",
    "REGLU", "RELU", "REPEAT", "RMS_NORM", "RMS_NORM_MUL_ADD", "ROPE", "SGN", "SIGMOID", "SILU", "SIN",
    "SOFTCAP", "SQR", "SQRT", "SSM_CONV", "STEP", "SUB", "SUM_ROWS", "SWIGLU", "TANH", "TIMESTEP_EMBEDDING",
})
CI_PARTIAL_RAN = frozenset({
    "CONT", "CPY", "FLASH_ATTN_EXT", "GET_ROWS", "MUL_MAT", "MUL_MAT_ID", "OUT_PROD", "PAD", "POOL_2D", "SCALE",
    "SET_ROWS", "SOFT_MAX", "SUM", "UPSCALE",
})
CI_PARTIAL_NONE = frozenset({
    "CONV_2D", "CONV_2D_DW", "CONV_TRANSPOSE_2D", "CROSS_ENTROPY_LOSS_BACK", "GET_ROWS_BACK", "OPT_STEP_ADAMW",
    "REPEAT_BACK", "RMS_NORM_BACK", "ROLL", "ROPE_BACK", "RWKV_WKV6", "RWKV_WKV7", "SET", "SILU_BACK",
    "SOFT_MAX_BACK", "SSM_SCAN",
})
CI_PASSED = CI_SUPPORTED | CI_PARTIAL_RAN
CI_RAN = CI_PASSED | CI_PARTIAL_NONE


@dataclass(frozen=True)
class Evidence:
    level: str
    line: str      # what it rests on, with its source

    def __str__(self) -> str:
        return f"{self.level}: {self.line}"


def operator_evidence(operator: str, family: str = "310P") -> Evidence:
    """The evidence that `operator` runs (or is refused) on a SoC of `family` other than the
    910B, in the order of LEVELS."""
    if unoffered(family, operator):
        if operator in PAGES_WITHOUT_310P and not _registration_refuses(family, operator):
            return Evidence(PAGE_ALONE, f"aclnn{operator} refused: {page_refusal(family, operator)}")
        return Evidence(PAGE_AND_SOURCE, f"aclnn{operator} refused: {unoffered(family, operator)}")
    if operator in DEVICE_PATHS_310P:
        return Evidence(DEVICE_PATH, f"aclnn{operator}: {DEVICE_PATHS_310P[operator]}")
    if operator in PAGES_WITHOUT_310P:
        if operator in GGML_CANN_CALLS:
            return Evidence(BUILD_CLAIMS, f"aclnn{operator}: ggml-cann's 310P build calls it, with no "
                                          f"310P-specific code; its page ({PAGES_WITHOUT_310P[operator]}) "
                                          f"does not offer the Atlas inference series")
        return Evidence(BUILD_CLAIMS, f"aclnn{operator}: only op_api's default branch accepts the 310P; its "
                                      f"page ({PAGES_WITHOUT_310P[operator]}) does not offer it and "
                                      f"ggml-cann does not call it")
    called = "; ggml-cann's 310P build calls it" if operator in GGML_CANN_CALLS else ""
    return Evidence(PAGE_ALONE, f"aclnn{operator}: its page offers the Atlas inference series{called}")


def _registration_refuses(family: str, operator: str) -> bool:
    return operator in UNOFFERED.get(family, {})


_RANK = {level: i for i, level in enumerate(LEVELS)}


def _weakest(items: list[Evidence]) -> Evidence:
    """The least sure of `items`, the lines of all of that level joined."""
    worst = max(items, key=lambda e: _RANK[e.level])
    same = [e for e in items if e.level == worst.level]
    return worst if len(same) == 1 else Evidence(worst.level, "; ".join(dict.fromkeys(e.line for e in same)))


def accepted(op_key: str, called: list[str], beyond: str, family: str, op: str) -> Evidence:
    """The evidence of a node of `op_key` a rule accepts on `family`: `called`, the aclnn
    operators its handler calls there; `beyond`, the rule's note where it accepts the node
    beyond ggml-cann ("" where it does not); `op`, the case's op (the name the Ascend CI
    runs it under)."""
    past = Evidence(PAGE_ALONE, f"beyond ggml-cann, no device has run it: {beyond}")
    if family != DEFAULT:
        if op_key in DEVICE_PATH_OPS_310P and not beyond:
            return Evidence(DEVICE_PATH, DEVICE_PATH_OPS_310P[op_key])
        return _weakest([operator_evidence(o, family) for o in called] + ([past] if beyond else []))
    if beyond:
        return past
    if op in CI_PASSED:
        return Evidence(DEVICE_RUN, f"{CI_REPORT} passes {op}")
    return Evidence(PAGE_ALONE, f"no device run: {CI_REPORT} does not pass {op}"
                                + ("" if op in CI_RAN else " (not among the ops it runs)"))


def refused(why: Refusal, others: list[Refusal], op: str) -> Evidence:
    """The evidence of the refusal `why` of a node (`op`: the case's op): the surest of the
    reasons that refuse it, `why` (the first one found) and `others` (on another SoC than the
    910B, that SoC's own: ggml-cann's 310P branch, the missing BFLOAT16, an operator not
    offered)."""
    return min((_reason_evidence(r, op) for r in [why, *others]), key=lambda e: _RANK[e.level])


def _reason_evidence(why: Refusal, op: str) -> Evidence:
    if why.check is Failed.UNOFFERED:
        return operator_evidence(why.operator, why.soc)
    if why.check is Failed.EVERY_RULE_SOC:
        return Evidence(PAGE_AND_SOURCE, "the pages' notes on the Atlas inference series (不支持BFLOAT16) and "
                                         "op_api's BF16 checks (DAV_2201 / regbase only)")
    if why.check is Failed.SOC:
        return Evidence(DEVICE_PATH, f"{GGML_CANN} ggml-cann.cpp, supports_op's #ifdef ASCEND_310P branch refuses it")
    if why.check is Failed.NARROWER:
        return Evidence(PAGE_ALONE, "ggml-cann claims it; refused for a measured reason (docs/rules-vs-ggml-cann.md)")
    if why.soc != DEFAULT:
        return Evidence(BUILD_CLAIMS, "ggml-cann's supports_op refuses it on every SoC (or ops' rule, as it)")
    if op in CI_RAN:
        return Evidence(DEVICE_RUN, f"{CI_REPORT}: its run of {op} refuses what ggml-cann's supports_op refuses")
    return Evidence(PAGE_ALONE, f"no device run: {op} is not among the ops of {CI_REPORT}")


def of_case(judged: list[tuple[Tensor, Refusal | None, Evidence]]) -> Evidence:
    """The evidence of a case's verdict from its judged nodes (node, refusal or None,
    evidence), up to the first refused: that one's, else the least sure node's."""
    if judged and judged[-1][1]:
        return judged[-1][2]
    return _weakest([e for _, _, e in judged]) if judged else Evidence(PAGE_ALONE, "no op node")
