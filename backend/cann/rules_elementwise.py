"""CANN rules of SQR, SQRT, LOG, SIN, COS, CLAMP, LEAKY_RELU, ACC, SET and ADD_ID
(native/aclnn/ops_elementwise.c). ADD_ID has no ggml-cann mapping: it is aclnnGatherV2 of
b's rows by ids, then aclnnAdd."""
from __future__ import annotations

from dataclasses import replace

from .rules import ELEMENTS, FLOAT, RULES, Rule, same_type, unary


def _src1_converts(node) -> bool:
    s, d = node.src[1].type.name, node.type.name
    return s == d or (s in FLOAT and d in FLOAT)


def _in_place(node, soc=None) -> bool:
    return node.view_src is not None


def _in_place_or(rule: Rule, in_place_op: str) -> Rule:
    """rule, whose operator runs when dst is a tensor of its own, and in_place_op when dst is src."""
    out_of_place = rule.aclnn[0]
    return replace(rule, aclnn=(out_of_place, in_place_op),
                   calls={out_of_place: lambda n, soc: not _in_place(n), in_place_op: _in_place})


def _dst_of_a_type(node) -> bool:
    return node.type == node.src[0].type


RULES.update({
    "SQR": unary("Mul"),
    "SQRT": unary("Sqrt"),
    "LOG": unary("Log"),
    "SIN": unary("Sin"),
    "COS": unary("Cos"),
    # dst is src (v0.20.2's clamp, leaky_relu with inplace): the operators' in-place forms
    "CLAMP": _in_place_or(unary("Clamp"), "InplaceHardtanh"),
    "LEAKY_RELU": _in_place_or(unary("LeakyRelu"), "InplaceLeakyRelu"),
    # dst = src0 (a device copy), then src1 added into / copied into a view of dst
    "ACC": Rule(("Add", "InplaceAdd", "InplaceCopy"), {"src0": FLOAT, "src1": FLOAT, "dst": FLOAT},
                ((same_type, "src0 and dst types differ"),)),
    "SET": Rule(("InplaceCopy",), {"src0": ELEMENTS, "src1": ELEMENTS, "dst": ELEMENTS},
                ((same_type, "src0 and dst types differ"),
                 (_src1_converts, "src1 converts into dst only between float types"))),
    "ADD_ID": Rule(("GatherV2", "Add"), {"src0": FLOAT, "src1": FLOAT, "src2": frozenset({"i32"}), "dst": FLOAT},
                   ((_dst_of_a_type, "src0 and dst types differ"),),
                   beyond="every case: ggml-cann v0.20.2 has no ADD_ID; aclnnGatherV2 picks each "
                          "row's bias, aclnnAdd adds it, both documented for these types"),
})
