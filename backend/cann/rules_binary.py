"""CANN rules of ADD / ADD1 / SUB / MUL / DIV and SCALE (native/aclnn/ops_binary.c):
element-wise arithmetic on float types, src1 repeated onto src0."""
from __future__ import annotations

from cannops.cases.graph import Tensor

from .rules import FLOAT, RULES, Rule


def _not_310p(node: Tensor, soc: str) -> bool:
    return soc != "310P"


def _binary(op: str) -> Rule:
    return Rule((op,), {"src0": FLOAT, "src1": FLOAT, "dst": FLOAT})


def _add_or_sub(op: str) -> Rule:
    """On 310P, whose pages offer no aclnnAdd / aclnnSub: both operands copied into a pair
    buffer (aclnnInplaceCopy, src1 broadcast), src1 negated for SUB (aclnnInplaceMuls), and
    summed over the pair by aclnnReduceSum, the same single rounding."""
    return Rule((op, "InplaceCopy", "InplaceMuls", "ReduceSum"), {"src0": FLOAT, "src1": FLOAT, "dst": FLOAT},
                calls={op: _not_310p})


def _no_bias(node: Tensor) -> bool:
    return node.param_f32(1) == 0.0


RULES.update({
    "ADD": _add_or_sub("Add"),
    "ADD1": _add_or_sub("Add"),
    "SUB": _add_or_sub("Sub"),
    "MUL": _binary("Mul"),
    "DIV": _binary("Div"),
    # as ggml-cann v0.20.2, which refuses a bias (the handler would add it with InplaceAdds)
    "SCALE": Rule(("Muls", "InplaceAdds"), {"src0": FLOAT, "dst": FLOAT},
                  ((_no_bias, "a bias (b != 0): ggml-cann v0.20.2 refuses it"),),
                  calls={"InplaceAdds": lambda n, soc: not _no_bias(n)}),
})
