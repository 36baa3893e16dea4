"""The Ascend SoCs the CANN rules and the simulator tell apart: a family per SoC name as
aclrtGetSocName reports it, and the simulated SoC that `--soc` picks per family."""
from __future__ import annotations

import os

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


# Per SoC family, the simulated aclnn operators not offered there: operator -> its page and
# its kernel registration (M / N / X: hicann/ops-math, ops-nn, ops-transformer at the commits
# of tests/data/ascend-tables.json, which tests/test_cann_sim_tables.py checks this table
# against). A page's 产品支持情况 gives each product one of three states: offered (√ / 支持),
# not offered (× / 不支持) or not documented (no row). Where a page does not offer the 310P,
# the source decides (docs/cann-sim-dtypes.md, "The 310P"):
# - its kernel registrations (op_host/*_def.cpp, AddConfig) name Atlas A2 SoCs but not
#   ascend310p: page and source agree, the operator is refused (this table);
# - they name ascend310p (LayerNorm), or no A2 SoC either (only ascend950, or none: the A2
#   kernel, too, comes from CANN's built-in package, or the operator runs on the AI CPU):
#   the source gives the page's "no" no ground, and op_api's default NpuArch branch accepts
#   the 310P with the pre-A2 dtype list: offered, with the page's A2 dtypes less BFLOAT16.
#   At the extracted commits that overrules the 不支持 of 32 pages (aclnnAdd, Div, Exp, ...,
#   which ggml-cann's ASCEND_310P build calls; no 310P run of it is published).
# The simulator refuses these operators on that SoC; the rules refuse an op whose handler
# would call one (Rule.calls says when a handler calls an operator only for some nodes).
UNOFFERED: dict[str, dict[str, str]] = {
    "310P": {
        "CircularPad2d": "M conversion/circular_pad/docs/aclnnCircularPad2d.md",
        "FusedInferAttentionScoreV2": "X attention/fused_infer_attention_score/docs/aclnnFusedInferAttentionScoreV2.md",
        "RotaryPositionEmbedding": "X posembedding/rotary_position_embedding/docs/aclnnRotaryPositionEmbedding.md",
    },
}


# Operators whose aclnn page (hicann ops-math M, ops-nn N, ops-transformer X, at the commits
# of tests/data/ascend-tables.json) does not offer the Atlas inference series: 不支持, or
# no row ("silent"). tests/test_cann_evidence.py checks this table against those pages.
PAGES_WITHOUT_310P: dict[str, str] = {
    "Add": "M math/add/docs/aclnnAdd&aclnnInplaceAdd.md",
    "CircularPad2d": "M conversion/circular_pad/docs/aclnnCircularPad2d.md",
    "Div": "M math/div/docs/aclnnDiv&aclnnInplaceDiv.md",
    "EqTensor": "M math/equal/docs/aclnnEqTensor&aclnnInplaceEqTensor.md",
    "Exp": "M math/exp/docs/aclnnExp&aclnnInplaceExp.md",
    "FastGelu": "N activation/fast_gelu/docs/aclnnFastGelu.md",
    "FusedInferAttentionScoreV2": "X attention/fused_infer_attention_score/docs/"
                                  "aclnnFusedInferAttentionScoreV2.md (silent)",
    "Ger": "M math/ger/docs/aclnnGer.md",
    "Hardsigmoid": "N activation/hard_sigmoid/docs/aclnnHardsigmoid&aclnnInplaceHardsigmoid.md",
    "Hardswish": "N activation/hard_swish/docs/aclnnHardswish&aclnnInplaceHardswish.md",
    "Im2col": "M conversion/im2col/docs/aclnnIm2col.md",
    "InplaceAdd": "M math/add/docs/aclnnAdd&aclnnInplaceAdd.md",
    "InplaceAdds": "M math/add/docs/aclnnInplaceAdds.md",
    "InplaceDiv": "M math/div/docs/aclnnDiv&aclnnInplaceDiv.md",
    "InplaceDivs": "M math/div/docs/aclnnDivs&aclnnInplaceDivs.md",
    "InplaceEqTensor": "M math/equal/docs/aclnnEqTensor&aclnnInplaceEqTensor.md",
    "InplaceExp": "M math/exp/docs/aclnnExp&aclnnInplaceExp.md",
    "InplaceIndexCopy": "N index/scatter_update/docs/aclnnIndexCopy&aclnnInplaceIndexCopy.md",
    "InplaceIndexFillTensor": "N index/index_fill_d/docs/aclnnIndexFillTensor&aclnnInplaceIndexFillTensor.md",
    "InplaceLeakyRelu": "N activation/leaky_relu/docs/aclnnLeakyRelu&aclnnInplaceLeakyRelu.md",
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
    "RotaryPositionEmbedding": "X posembedding/rotary_position_embedding/docs/"
                               "aclnnRotaryPositionEmbedding.md (silent)",
    "Sign": "M math/sign/docs/aclnnSign.md",
    "Slice": "M conversion/slice/docs/aclnnSlice.md",
    "Sqrt": "M math/sqrt/docs/aclnnSqrt&aclnnInplaceSqrt.md",
    "Sub": "M math/sub/docs/aclnnSub&aclnnInplaceSub.md",
    "Tanh": "M math/tanh/docs/aclnnTanh&aclnnInplaceTanh.md",
    "TriangularSolve": "M math/triangular_solve/docs/aclnnTriangularSolve.md",
    "Tril": "M conversion/tril/docs/aclnnTril&aclnnInplaceTril.md",
}

# --soc-evidence: "source" (the default: where page and source disagree on the 310P, the
# source decides, docs/cann-sim-dtypes.md) or "pages" (every operator its page does not
# offer is refused, as a device without its kernel answers); CANN-SIM's workers inherit it
MODES = ("source", "pages")
ENV = "CANN_SIM_SOC_EVIDENCE"


def mode() -> str:
    return os.environ.get(ENV) or MODES[0]


def use(value: str | None) -> None:
    """--soc-evidence: this process's and its workers' reading of the pages (ValueError
    names a bad value)."""
    if value is None:
        return
    if value not in MODES:
        raise ValueError(f"unknown evidence {value!r}: one of {', '.join(MODES)}")
    os.environ[ENV] = value


def page_refusal(family: str, operator: str) -> str | None:
    """With --soc-evidence pages, why `operator` is refused on the 310P: its page does not
    offer it; else None."""
    if family == DEFAULT or mode() != "pages" or operator not in PAGES_WITHOUT_310P:
        return None
    return (f"its page ({PAGES_WITHOUT_310P[operator]}) does not offer the Atlas inference series "
            f"(--soc-evidence pages: the page decides, a device without the kernel answers 561003)")


def unoffered(family_: str, operator: str) -> str | None:
    """Why aclnn`operator` is not offered on SoC family `family_` (its page, and that its
    kernel registration leaves the SoC out; with --soc-evidence pages, its page alone:
    page_refusal), else None."""
    page = UNOFFERED.get(family_, {}).get(operator)
    if page is None:
        return page_refusal(family_, operator)
    return (f"its page ({page}) does not offer the Atlas inference series and its kernel "
            f"registration (op_host/*_def.cpp) names Atlas A2 SoCs but not ascend310p")
