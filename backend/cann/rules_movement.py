"""CANN rules of the data-movement ops (native/aclnn/ops_movement.c): REPEAT, REPEAT_BACK,
CONCAT, GET_ROWS, PAD, PAD_REFLECT_1D, ROLL, ARANGE, FILL, TRI, DIAG, DIAG_MASK_INF.

Types are those with an aclDataType that the operators accept on Atlas A2/A3 (block-
quantized types have none, so they only enter where a handler dequantizes them: q8_0
rows, as ggml-cann does). REPEAT_BACK and ROLL have no ggml-cann mapping; aclnnReduceSum
and aclnnRoll express them. Circular PAD (a ggml-cann TODO) is aclnnCircularPad2d,
whose limits are the rule's."""
from __future__ import annotations

from .rules import ELEMENTS, FLOAT, RULES, Rule, same_type, no_bf16

I32 = frozenset({"i32"})
TRI_LOWER_DIAG, TRI_LOWER = 2, 3   # enum ggml_tri_type: aclnnTril; UPPER(_DIAG): aclnnTriu
F32 = frozenset({"f32"})
# aclnnRoll: no DOUBLE
ROLL_TYPES = FLOAT | {"i8", "i16", "i32", "i64"}
# aclnnCircularPad2d: FLOAT16, BFLOAT16, FLOAT, INT8, INT32, and out's innermost dim
# below these sizes
CIRCULAR_LIMIT = {"f16": 49088, "bf16": 49088, "f32": 24544, "i8": 98176, "i32": 24544}


def _few_repeats(node) -> bool:
    """aclnnRepeat repeats at most 4 dims at once when the outermost is repeated, else 3."""
    reps = [node.ne[i] // node.src[0].ne[i] for i in reversed(range(4))]
    return sum(r != 1 for r in reps) <= (4 if reps[0] != 1 else 3)


def _pads(node) -> list[tuple[int, int, int]]:
    """(left, right, source size) per ggml dim."""
    p, src = node.params_i32(8), node.src[0]
    return [(p[2 * d], p[2 * d + 1], src.ne[d]) for d in range(4)]


def _circular_ok(node) -> bool:
    if not node.param_i32(8):
        return True
    limit = CIRCULAR_LIMIT.get(node.type.name)
    pads = _pads(node)
    return (limit is not None and all(0 <= lo < n and 0 <= hi < n for lo, hi, n in pads)
            and node.ne[0] < limit and node.ne[2] < limit)


def _merge23(t) -> bool:
    return t.nb[3] == t.nb[2] * t.ne[2]


def _get_rows_types(node) -> bool:
    s, d = node.src[0].type.name, node.type.name
    return s == d or (s in FLOAT | {"q8_0"} and d in FLOAT)


def _not_f32(node) -> bool:
    return node.type.name != "f32"


_F32_ONLY = ("non-f32 types (none in the catalog): ggml-cann v0.20.2 takes f32 only, the aclnn "
             "operators document the others")

RULES.update({
    "REPEAT": Rule(("Repeat",), {"src0": ELEMENTS, "dst": ELEMENTS},
                   ((same_type, "src0 and dst types differ"),
                    (_few_repeats, "aclnnRepeat repeats at most 4 dims at once (3 when the "
                                   "outermost is not repeated)"))),
    "REPEAT_BACK": Rule(("ReduceSum", "InplaceCopy"), {"src0": ELEMENTS, "dst": ELEMENTS},
                        ((same_type, "src0 and dst types differ"),),
                        beyond="every case: ggml-cann v0.20.2 has no REPEAT_BACK; it is one "
                               "aclnnReduceSum over the repeats (keepDim), documented for these types"),
    # block-quantized sources are concatenated as the bytes of their rows
    "CONCAT": Rule(("Cat",), {}, ((same_type, "src0 and dst types differ"),
                                  (lambda n: n.src[1].type == n.type, "src1 and dst types differ"))),
    # f32 / f16 / bf16 rows converted by aclnnCast, q8_0 dequantized by aclnnMul, as in
    # ggml-cann; i32 rows gathered as they are (aclnnGatherV2 takes INT32). Many batch
    # slices: row ids offset by aclnnArange + aclnnAdd, one gather
    "GET_ROWS": Rule(("GatherV2", "Cast", "Mul", "Arange", "Add"),
                     {"src0": FLOAT | I32 | {"q8_0"}, "src1": I32, "dst": FLOAT | I32},
                     ((_get_rows_types, "src0 does not convert to dst"),),
                     beyond="i32 rows: ggml-cann v0.20.2 gathers floats and q8_0 only; "
                            "aclnnGatherV2 documents INT32 self",
                     beyond_when=lambda node: node.src[0].type.name == "i32",
                     soc={"310P": ((no_bf16, "bf16 rows on 310P: ggml-cann's ASCEND_310P branch "
                                             "leaves BF16 out of GET_ROWS"),)}),
    "PAD": Rule(("ConstantPadNd", "CircularPad2d"), {"src0": ELEMENTS, "dst": ELEMENTS},
                ((same_type, "src0 and dst types differ"),
                 (_circular_ok, "circular padding (aclnnCircularPad2d) takes f32 / f16 / bf16 / "
                                "i8 / i32, pads below each padded dim's size and a bounded "
                                "innermost output dim")),
                calls={"CircularPad2d": lambda n, soc: n.param_i32(8) != 0},
                beyond="circular padding: ggml-cann v0.20.2 refuses it (a TODO there); "
                       "aclnnCircularPad2d is documented for it, within the limits checked above",
                beyond_when=lambda node: node.param_i32(8) != 0),
    "PAD_REFLECT_1D": Rule(("ReflectionPad1d",), {"src0": ELEMENTS, "dst": ELEMENTS},
                           ((same_type, "src0 and dst types differ"),
                            (lambda n: _merge23(n.src[0]) and _merge23(n),
                             "dims 2 and 3 must merge into one (aclnnReflectionPad1d takes 2-3 dims)"),
                            (lambda n: all(0 <= n.param_i32(i) < n.src[0].ne[0] for i in (0, 1)),
                             "reflection pads must be below the row length"))),
    "ROLL": Rule(("Roll",), {"src0": ROLL_TYPES, "dst": ROLL_TYPES},
                 ((same_type, "src0 and dst types differ"),),
                 beyond="every case: ggml-cann v0.20.2 has no ROLL; aclnnRoll is its operator "
                        "(shifts and dims as ggml's), documented for these types"),
    "ARANGE": Rule(("Arange",), {"dst": F32}),
    # ggml-cann v0.20.2 takes FILL, TRI and DIAG of f32 only; no catalog case has another
    # type, and the aclnn operators document the others (checked on CANN-SIM by hand)
    "FILL": Rule(("InplaceFillScalar",), {"dst": ELEMENTS}, beyond=_F32_ONLY, beyond_when=_not_f32),
    "TRI": Rule(("Tril", "Triu"), {"src0": ELEMENTS, "dst": ELEMENTS},
                ((same_type, "src0 and dst types differ"),), beyond=_F32_ONLY, beyond_when=_not_f32,
                calls={"Tril": lambda n, soc: n.param_i32(0) in (TRI_LOWER_DIAG, TRI_LOWER),
                       "Triu": lambda n, soc: n.param_i32(0) not in (TRI_LOWER_DIAG, TRI_LOWER)}),
    "DIAG": Rule(("InplaceFillScalar", "InplaceCopy"), {"src0": ELEMENTS, "dst": ELEMENTS},
                 ((same_type, "src0 and dst types differ"),), beyond=_F32_ONLY, beyond_when=_not_f32),
    # the -inf mask needs a float type
    "DIAG_MASK_INF": Rule(("InplaceFillScalar", "InplaceTriu", "Tril", "InplaceAdd"),
                          {"src0": FLOAT, "dst": FLOAT}, ((same_type, "src0 and dst types differ"),)),
})
