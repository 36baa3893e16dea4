"""Rules of SOFT_MAX (native/aclnn/ops_softmax.c): scale, f32 / f16 mask broadcast over
dims 2 and 3, ALiBi slopes, attention sinks."""
from __future__ import annotations

from .rules import FLOAT, RULES, Rule, same_type


def _src(node, i):
    return node.src[i] if i < len(node.src) else None


def _mask_ok(node) -> bool:
    m = _src(node, 1)
    return m is None or m.type.name in ("f32", "f16")


def _no_sinks(node) -> bool:
    return _src(node, 2) is None


RULES.update({
    "SOFT_MAX": Rule(("Muls", "InplaceAdd", "Arange", "PowScalarTensor", "Mul", "InplaceCopy",
                      "Softmax"),
                     {"src0": FLOAT, "dst": FLOAT},
                     ((same_type, "src0 and dst types differ"),
                      (_mask_ok, "the mask must be f32 or f16"),
                      (_no_sinks, "attention sinks: ggml-cann v0.20.2 refuses them "
                                  "(the handler's aclnn composition is kept for a later mapping)")),
                     # the mask is added with aclnnInplaceAdd
                     calls={"InplaceAdd": lambda n, soc: _src(n, 1) is not None}),
})
