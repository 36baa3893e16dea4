"""CANN rules of ADD / ADD1 / SUB / MUL / DIV and SCALE (native/aclnn/ops_binary.c):
element-wise arithmetic on float types, src1 repeated onto src0."""
from __future__ import annotations

from cannops.cases.graph import Tensor

from .rules import FLOAT, RULES, Rule


def _binary(op: str) -> Rule:
    return Rule((op,), {"src0": FLOAT, "src1": FLOAT, "dst": FLOAT})


def _no_bias(node: Tensor) -> bool:
    return node.param_f32(1) == 0.0


RULES.update({
    "ADD": _binary("Add"),
    "ADD1": _binary("Add"),
    "SUB": _binary("Sub"),
    "MUL": _binary("Mul"),
    "DIV": _binary("Div"),
    # as ggml-cann v0.20.2, which refuses a bias (the handler would add it with InplaceAdds)
    "SCALE": Rule(("Muls", "InplaceAdds"), {"src0": FLOAT, "dst": FLOAT},
                  ((_no_bias, "a bias (b != 0): ggml-cann v0.20.2 refuses it"),),
                  calls={"InplaceAdds": lambda n, soc: not _no_bias(n)}),
})
