"""CANN rules of DUP / CONT / CPY (native/aclnn/ops_copy.c): aclnnInplaceCopy within a
type, aclnnCast between float types; on 310P (ggml-cann's ASCEND_310P build) CPY of f32 /
f16 only and CONT of no bf16."""
from __future__ import annotations

from typing import Callable

from cannops.cases.graph import Tensor

from .rules import ELEMENTS, FLOAT, RULES, Rule


def _convertible(node: Tensor) -> bool:
    s, d = node.src[0].type.name, node.type.name
    return s == d or (s in FLOAT and d in FLOAT)


def _floats(node: Tensor) -> bool:
    return node.src[0].type.name in FLOAT and node.type.name in FLOAT


def _f32_f16(node: Tensor) -> bool:
    return {node.src[0].type.name, node.type.name} <= {"f32", "f16"}


def _copy(floats_only: bool = False, on_310p: tuple = ()) -> Rule:
    checks: tuple[tuple[Callable[[Tensor], bool], str], ...] = (
        (_convertible, "only float types convert into each other"),)
    if floats_only:
        checks += ((_floats, "an integer copy: ggml-cann v0.20.2 copies f32 / f16 / bf16 only"),)
    return Rule(("InplaceCopy", "Cast"), {"src0": ELEMENTS, "dst": ELEMENTS}, checks,
                soc={"310P": on_310p} if on_310p else {})


RULES.update({
    # CONT and CPY of floats only, as ggml-cann v0.20.2 (aclnn would copy integers too),
    # DUP of any type
    "DUP": _copy(),
    "CONT": _copy(floats_only=True, on_310p=((lambda n: n.src[0].type.name != "bf16",
                                              "bf16 on 310P: ggml-cann's ASCEND_310P branch "
                                              "leaves BF16 out of CONT"),)),
    "CPY": _copy(floats_only=True, on_310p=((_f32_f16, "on 310P: ggml-cann's ASCEND_310P branch "
                                                       "copies F32 and F16 only"),)),
})
