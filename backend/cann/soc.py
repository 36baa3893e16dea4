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


# Per SoC family, the simulated aclnn operators not offered there: operator -> its page.
# A page's 产品支持情况 gives each product one of three states (the `support` column of
# tests/data/ascend-tables.json, which tests/test_cann_sim_tables.py checks this table
# against; M / N / X: hicann/ops-math, ops-nn, ops-transformer at its commits):
# - offered (√ / 支持): the page's dtypes, less what its product notes leave out;
# - not offered (× / 不支持: the doc says no): here, refused. At those commits every page
#   of this table but two says "<term>Atlas 推理系列产品</term>：不支持". Older copies were
#   silent: aclnnAdd's and aclnnRelu's pages had A2 / A3 rows only until their × rows of
#   2026-01-23 (ops-math 8bd9f6f29) and 2026-01-27 (ops-nn dea19dca2);
# - not documented (no row: the doc is silent; the open repositories document the kernels
#   they ship, the Atlas inference series' come in CANN's closed 310P package): offered,
#   with the page's dtypes less BFLOAT16 (the 310P has none), as ggml-cann's ASCEND_310P
#   build uses such operators; unless that build itself avoids the operator there, which
#   UNDOCUMENTED_AVOIDED records, with ggml-cann's words, and which then is refused too.
# The simulator refuses these operators on that SoC; the rules refuse an op whose handler
# would call one (Rule.calls says when a handler calls an operator only for some nodes).
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


# the operators of UNOFFERED whose page has no row for the SoC: why they stay refused
UNDOCUMENTED_AVOIDED: dict[str, dict[str, str]] = {
    "310P": {
        "FusedInferAttentionScoreV2": "ggml-cann's supports_op refuses FLASH_ATTN_EXT there "
                                      "(\"FA not support on 310p device\")",
        "RotaryPositionEmbedding": "ggml-cann's ROPE takes its own path there (\"Special ROPE "
                                   "operation for 310P\": aclnnRoll, aclnnMul, aclnnAdd)",
    },
}


def unoffered(family_: str, operator: str) -> str | None:
    """Why aclnn`operator` is not offered on SoC family `family_` (its page, and what the
    page says or why its silence is not taken), else None."""
    page = UNOFFERED.get(family_, {}).get(operator)
    if page is None:
        return None
    avoided = UNDOCUMENTED_AVOIDED.get(family_, {}).get(operator)
    if avoided:
        return f"its page ({page}) has no row for the Atlas inference series and {avoided}"
    return f"its page ({page}) says the Atlas inference series is not supported"
