"""CANN rules of GGML_OP_UNARY (native/aclnn/ops_unary.c): one aclnn operator per sub-op,
as ggml-cann maps it (EXPM1, FLOOR, CEIL, ROUND, TRUNC, XIELU have no mapping)."""
from __future__ import annotations

from .rules import RULES, unary

RULES.update({
    "UNARY:ABS": unary("Abs"),
    "UNARY:NEG": unary("Neg"),
    "UNARY:SGN": unary("Sign"),
    "UNARY:STEP": unary("GtScalar"),
    "UNARY:EXP": unary("Exp"),
    "UNARY:TANH": unary("Tanh"),
    "UNARY:ELU": unary("Elu"),
    "UNARY:RELU": unary("Relu"),
    "UNARY:SIGMOID": unary("Sigmoid"),
    "UNARY:SILU": unary("Silu"),
    "UNARY:GELU": unary("Gelu"),
    # the operators whose documented formula is the op's; ggml-cann maps GELU_ERF to
    # aclnnGelu (the tanh form) and GELU_QUICK to aclnnGeluV2(0) (erf-GELU, not x*sigmoid(1.702x))
    "UNARY:GELU_ERF": unary("GeluV2"),
    "UNARY:GELU_QUICK": unary("FastGelu"),
    "UNARY:HARDSIGMOID": unary("Hardsigmoid"),
    "UNARY:HARDSWISH": unary("Hardswish"),
    "UNARY:SOFTPLUS": unary("Softplus"),
})
