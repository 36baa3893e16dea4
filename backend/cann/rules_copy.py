"""CANN rules of DUP / CONT / CPY (native/aclnn/ops_copy.c): aclnnInplaceCopy within a
type, aclnnCast between float types."""
from __future__ import annotations

from cannops.cases.graph import Tensor

from .rules import ELEMENTS, FLOAT, RULES, Rule


def _convertible(node: Tensor) -> bool:
    s, d = node.src[0].type.name, node.type.name
    return s == d or (s in FLOAT and d in FLOAT)


def _floats(node: Tensor) -> bool:
    return node.src[0].type.name in FLOAT and node.type.name in FLOAT


def _copy(floats_only: bool = False) -> Rule:
    checks = ((_convertible, "only float types convert into each other"),)
    if floats_only:
        checks += ((_floats, "an integer copy: ggml-cann v0.20.2 copies f32 / f16 / bf16 only"),)
    return Rule(("InplaceCopy", "Cast"), {"src0": ELEMENTS, "dst": ELEMENTS}, checks)


RULES.update({
    # CONT and CPY of floats only, as ggml-cann v0.20.2 (aclnn would copy integers too),
    # DUP of any type
    "DUP": _copy(),
    "CONT": _copy(floats_only=True),
    "CPY": _copy(floats_only=True),
})
