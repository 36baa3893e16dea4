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
#   which ggml-cann's ASCEND_310P build calls, as the Ascend 310P CI runs it).
# The simulator refuses these operators on that SoC; the rules refuse an op whose handler
# would call one (Rule.calls says when a handler calls an operator only for some nodes).
UNOFFERED: dict[str, dict[str, str]] = {
    "310P": {
        "CircularPad2d": "M conversion/circular_pad/docs/aclnnCircularPad2d.md",
        "FusedInferAttentionScoreV2": "X attention/fused_infer_attention_score/docs/aclnnFusedInferAttentionScoreV2.md",
        "RotaryPositionEmbedding": "X posembedding/rotary_position_embedding/docs/aclnnRotaryPositionEmbedding.md",
    },
}


def unoffered(family_: str, operator: str) -> str | None:
    """Why aclnn`operator` is not offered on SoC family `family_` (its page, and that its
    kernel registration leaves the SoC out), else None."""
    page = UNOFFERED.get(family_, {}).get(operator)
    if page is None:
        return None
    return (f"its page ({page}) does not offer the Atlas inference series and its kernel "
            f"registration (op_host/*_def.cpp) names Atlas A2 SoCs but not ascend310p")
