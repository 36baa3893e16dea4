"""The Ascend SoCs the CANN rules and the simulator tell apart: a family per SoC name as
aclrtGetSocName reports it, and the simulated SoC that `--soc` picks per family."""
from __future__ import annotations

# family -> the SoC CANN-SIM simulates for it (CANN_SIM_SOC); ggml-cann builds "310P"
# with ASCEND_310P, every other SoC (Atlas A2 / A3) without
SIMULATED = {"910B": "Ascend910B3", "310P": "Ascend310P3"}
FAMILIES = tuple(SIMULATED)
DEFAULT = "910B"


def family(soc_name: str) -> str:
    """"310P" for the Atlas inference series (Ascend310P*), "910B" for the others."""
    return "310P" if soc_name.startswith("Ascend310P") else DEFAULT


def parse(text: str) -> list[str]:
    """--soc's comma list of families, each once; ValueError names a bad one."""
    out = []
    for item in (x.strip().upper() for x in text.split(",")):
        if item not in SIMULATED:
            raise ValueError(f"unknown SoC {item!r}: one of {', '.join(FAMILIES)}")
        if item not in out:
            out.append(item)
    if not out:
        raise ValueError("--soc names no SoC")
    return out


# Per SoC family, the simulated aclnn operators its pages do not offer there: operator ->
# the page ("产品支持情况": "<term>Atlas 推理系列产品</term>：不支持", or no row for the
# Atlas inference series at all: FusedInferAttentionScoreV2, RotaryPositionEmbedding).
# M / N / X: hicann/ops-math, ops-nn, ops-transformer at the commits of
# tests/data/ascend-tables.json, whose `support` column tests/test_cann_sim_tables.py checks
# this table against. The simulator refuses these operators on that SoC; the rules refuse
# an op whose handler would call one (Rule.calls says when a handler calls an operator only
# for some nodes). The pages are the same for every CANN release read (hiascend.com 82RC1,
# 83RC1 aclnnRelu / aclnnAdd: no Atlas inference series either).
UNOFFERED: dict[str, dict[str, str]] = {
    "310P": {
        "Add": "M math/add/docs/aclnnAdd&aclnnInplaceAdd.md",
        "CircularPad2d": "M conversion/circular_pad/docs/aclnnCircularPad2d.md",
        "Div": "M math/div/docs/aclnnDiv&aclnnInplaceDiv.md",
        "EqTensor": "M math/equal/docs/aclnnEqTensor&aclnnInplaceEqTensor.md",
        "Exp": "M math/exp/docs/aclnnExp&aclnnInplaceExp.md",
        "FastGelu": "N activation/fast_gelu/docs/aclnnFastGelu.md",
        "FusedInferAttentionScoreV2": "X attention/fused_infer_attention_score/docs/aclnnFusedInferAttentionScoreV2.md",
        "Hardsigmoid": "N activation/hard_sigmoid/docs/aclnnHardsigmoid&aclnnInplaceHardsigmoid.md",
        "Hardswish": "N activation/hard_swish/docs/aclnnHardswish&aclnnInplaceHardswish.md",
        "Im2col": "M conversion/im2col/docs/aclnnIm2col.md",
        "InplaceAdd": "M math/add/docs/aclnnAdd&aclnnInplaceAdd.md",
        "InplaceAdds": "M math/add/docs/aclnnInplaceAdds.md",
        "InplaceDiv": "M math/div/docs/aclnnDiv&aclnnInplaceDiv.md",
        "InplaceDivs": "M math/div/docs/aclnnDivs&aclnnInplaceDivs.md",
        "InplaceExp": "M math/exp/docs/aclnnExp&aclnnInplaceExp.md",
        "InplaceIndexCopy": "N index/scatter_update/docs/aclnnIndexCopy&aclnnInplaceIndexCopy.md",
        "InplaceIndexFillTensor": "N index/index_fill_d/docs/aclnnIndexFillTensor&aclnnInplaceIndexFillTensor.md",
        "InplaceSub": "M math/sub/docs/aclnnSub&aclnnInplaceSub.md",
        "InplaceThreshold": "N activation/threshold/docs/aclnnThreshold&aclnnInplaceThreshold.md",
        "LayerNorm": "N norm/layer_norm_v4/docs/aclnnLayerNorm&aclnnLayerNormWithImplMode.md",
        "LeakyRelu": "N activation/leaky_relu/docs/aclnnLeakyRelu&aclnnInplaceLeakyRelu.md",
        "Log": "M math/log/docs/aclnnLog&aclnnInplaceLog.md",
        "MaxPool": "N pooling/max_pool_v3/docs/aclnnMaxPool.md",
        "Neg": "M math/neg/docs/aclnnNeg&aclnnInplaceNeg.md",
        "Permute": "M conversion/transpose/docs/aclnnPermute.md",
        "Relu": "N activation/relu/docs/aclnnRelu&aclnnInplaceRelu.md",
        "RepeatInterleaveIntWithDim": "N index/repeat_interleave/docs/aclnnRepeatInterleaveIntWithDim.md",
        "RotaryPositionEmbedding": "X posembedding/rotary_position_embedding/docs/aclnnRotaryPositionEmbedding.md",
        "Sign": "M math/sign/docs/aclnnSign.md",
        "Slice": "M conversion/slice/docs/aclnnSlice.md",
        "Sqrt": "M math/sqrt/docs/aclnnSqrt&aclnnInplaceSqrt.md",
        "Sub": "M math/sub/docs/aclnnSub&aclnnInplaceSub.md",
        "Tanh": "M math/tanh/docs/aclnnTanh&aclnnInplaceTanh.md",
        "TriangularSolve": "M math/triangular_solve/docs/aclnnTriangularSolve.md",
        "Tril": "M conversion/tril/docs/aclnnTril&aclnnInplaceTril.md",
    },
}


def unoffered(family_: str, operator: str) -> str | None:
    """The page that does not offer aclnn`operator` on SoC family `family_`, else None."""
    return UNOFFERED.get(family_, {}).get(operator)
