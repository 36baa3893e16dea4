"""Rules of the norm family (native/aclnn/ops_norm.c): NORM, RMS_NORM, L2_NORM, GROUP_NORM.
The fused test-mode chains (RMS_NORM_MUL_ADD, ...) are ordinary ADD / MUL / *_NORM nodes."""
from __future__ import annotations

from .rules import FLOAT, RULES, Rule, same_type


def _float_same(*ops: str, checks=()) -> Rule:
    return Rule(ops, {"src0": FLOAT, "dst": FLOAT},
                ((same_type, "src0 and dst types differ"),) + tuple(checks))


def _groups_divide_channels(node) -> bool:
    g = node.param_i32(0)
    return g > 0 and node.src[0].ne[2] % g == 0


def _eps_positive(node) -> bool:
    return node.param_f32(1) > 0.0


RULES.update({
    "NORM": _float_same("LayerNorm"),
    "RMS_NORM": _float_same("InplaceCopy", "InplaceFillScalar", "RmsNorm"),
    "L2_NORM": _float_same("Norm", "ClampMin", "Div"),
    "GROUP_NORM": _float_same("GroupNorm", checks=(
        # ggml lets the last group be smaller; aclnnGroupNorm needs equal groups
        (_groups_divide_channels, "aclnnGroupNorm needs the channels (ne2) divisible by n_groups"),
        (_eps_positive, "aclnnGroupNorm needs eps > 0"),
    )),
})
