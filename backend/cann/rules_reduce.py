"""CANN rules of SUM, SUM_ROWS, MEAN, ARGMAX, COUNT_EQUAL, CUMSUM and ARGSORT
(native/aclnn/ops_reduce.c). The source types are those both ggml and the aclnn
operator have (ReduceSum, Mean, ArgMax, EqTensor, Cumsum and Argsort take every
float and signed integer type of ggml)."""
from __future__ import annotations

from .rules import ELEMENTS, RULES, Rule, same_type

I32, I64 = frozenset({"i32"}), frozenset({"i64"})
NUMBERS = ELEMENTS
SORTABLE = ELEMENTS - {"f64"}      # aclnnArgsort has no DOUBLE


def _same_sources(node) -> bool:
    return node.src[0].type == node.src[1].type


def _rows_contiguous(node) -> bool:
    s = node.src[0]
    return s.ne[0] == s.type.blck_size or s.nb[0] == s.type.type_size


RULES.update({
    # as ggml-cann v0.20.2: a source whose rows are contiguous (ggml_is_contiguous_rows)
    "SUM": Rule(("ReduceSum",), {"src0": NUMBERS, "dst": NUMBERS},
                ((same_type, "src0 and dst types differ"),
                 (_rows_contiguous, "src0's rows are not contiguous: ggml-cann v0.20.2 refuses it"))),
    "SUM_ROWS": Rule(("ReduceSum",), {"src0": NUMBERS, "dst": NUMBERS},
                     ((same_type, "src0 and dst types differ"),)),
    "MEAN": Rule(("Mean",), {"src0": NUMBERS, "dst": frozenset({"f32"})}),
    "ARGMAX": Rule(("ArgMax",), {"src0": NUMBERS, "dst": I32}),
    "COUNT_EQUAL": Rule(("EqTensor", "ReduceSum"), {"src0": NUMBERS, "src1": NUMBERS, "dst": I64},
                        ((_same_sources, "src0 and src1 types differ"),)),
    "CUMSUM": Rule(("Cumsum",), {"src0": NUMBERS, "dst": NUMBERS}, ((same_type, "src0 and dst types differ"),),
                   beyond="non-f32 sources (no catalog case: ggml_cumsum asserts f32): ggml-cann "
                          "v0.20.2 takes f32 only, aclnnCumsum documents the other types",
                   beyond_when=lambda node: node.src[0].type.name != "f32"),
    "ARGSORT": Rule(("Argsort", "Cast"), {"src0": SORTABLE, "dst": I32}),
})
