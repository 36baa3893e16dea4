"""CANN rules of GGML_OP_GLU (native/aclnn/ops_glu.c): every gated activation runs on
f32 / f16 / bf16, with gate, input and output of one type (aclnnInplaceMul writes the
product into dst, which must hold the promoted type). SWIGLU_OAI has no ggml-cann mapping;
it is composed of aclnn operators here. SWIGLU_CLAMP is new in ggml 0.25.3, whose ggml-cann
accepts every case of it (supports_op) and composes it as here."""
from __future__ import annotations

from .rules import FLOAT, RULES, Rule


def _one_type(node) -> bool:
    return all(s.type == node.type for s in node.src if s is not None)


def _glu(*ops: str) -> Rule:
    return Rule(ops, {"src0": FLOAT, "dst": FLOAT},
                ((_one_type, "GLU inputs and output must have one type"),))


RULES.update({
    "GLU:REGLU": _glu("Relu", "InplaceMul"),
    "GLU:GEGLU": _glu("GeGluV3", "Gelu", "InplaceMul"),
    "GLU:GEGLU_ERF": _glu("GeGluV3", "GeluV2", "InplaceMul"),
    # aclnnFastGelu is x*sigmoid(1.702x) as ggml's; ggml-cann's aclnnGeluV2(0) is erf-GELU
    "GLU:GEGLU_QUICK": _glu("FastGelu", "InplaceMul"),
    "GLU:SWIGLU": _glu("SwiGlu", "Silu", "InplaceMul"),
    "GLU:SWIGLU_CLAMP": _glu("Clamp", "Silu", "InplaceMul"),
    "GLU:SWIGLU_OAI": Rule(("Clamp", "Muls", "InplaceSigmoid", "Mul", "InplaceAdds", "InplaceMul"),
                           {"src0": FLOAT, "dst": FLOAT}, ((_one_type, "GLU inputs and output must have one type"),),
                           beyond="every case: ggml-cann v0.20.2 has no SWIGLU_OAI; composed of aclnnClamp, "
                                  "Muls, InplaceSigmoid, Mul, InplaceAdds, InplaceMul, each documented for floats"),
})
