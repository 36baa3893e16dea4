"""Rule of ROPE (native/aclnn/ops_rope.c), as ggml-cann v0.20.2's supports_op: every mode
(normal, NeoX, M-RoPE, IMROPE, vision), freq factors and YaRN, f32 / f16 rows of at most
896 elements. ROPE_BACK has no rule: ggml-cann does not implement it.

Where the rule says less than ggml-cann: aclnnRotaryPositionEmbedding's page (Atlas A2/A3)
limits the rotated dim to D < 896 (ggml-cann lets 896 through) and the heads: B, N < 1000
in half mode, B * N < 1000 in interleave mode (x is read as BSND, B = ne3, N = ne1);
ggml-cann does not check those, the operator would refuse such a case at run time.

On 310P (ggml-cann's ASCEND_310P branch): contiguous rows rotated whole (n_dims == ne0), which
the handler rotates with aclnnRoll, aclnnMul and aclnnAdd as ggml-cann does there:
aclnnRotaryPositionEmbedding registers no kernel for the Atlas inference series
(docs/cann-sim-dtypes.md, "The 310P").
"""
from __future__ import annotations

from .rules import RULES, From, Rule, same_type

F32_F16 = frozenset({"f32", "f16"})
NEOX, MROPE, VISION = 2, 8, 24


def _rope_dims(node) -> int:
    return node.src[0].ne[0] if node.param_i32(2) == VISION else node.param_i32(1)


def _rotated_dim_fits(node) -> bool:
    return node.src[0].ne[0] <= 896 and _rope_dims(node) < 896


def _no_offset(node) -> bool:
    return node.param_i32(15) == 0


def _heads_fit(node) -> bool:
    b, n = node.src[0].ne[3], node.src[0].ne[1]
    half = node.param_i32(2) & (NEOX | MROPE)
    return (b < 1000 and n < 1000) if half else b * n < 1000


def _full_width(node) -> bool:
    return node.src[0].ne[0] == node.param_i32(1)


def _contiguous(node) -> bool:
    from .rules_matmul import ggml_is_contiguous
    return ggml_is_contiguous(node.src[0])


def _yarn(node, soc) -> bool:
    return node.param_f32(7) != 0.0   # ext_factor: the YaRN ramp


# the operators a ROPE handler calls only on some paths: the YaRN ramp's, the frequency
# factors' aclnnDiv, the interleaved sin / cos of normal mode, and
# aclnnRotaryPositionEmbedding (not on 310P: aclnnRoll, aclnnMul and aclnnAdd there)
_CALLS = {**{op: _yarn for op in ("InplaceSubs", "InplaceDivs", "InplaceThreshold", "InplaceClampMax",
                                  "InplaceAdds")},
          "Div": lambda node, soc: len(node.src) > 2 and node.src[2] is not None,
          "RepeatInterleaveIntWithDim": lambda node, soc: not node.param_i32(2) & (NEOX | MROPE),
          "RotaryPositionEmbedding": lambda node, soc: soc != "310P"}


RULES.update({
    "ROPE": Rule(("InplaceSubs", "InplaceDivs", "InplaceMuls", "InplaceThreshold", "InplaceClampMax",
                  "IndexSelect", "RepeatInterleaveIntWithDim", "RotaryPositionEmbedding", "Arange",
                  "InplaceAdds", "InplaceMul", "Mul", "Div", "Sin", "Cos", "Repeat", "Cast",
                  "InplaceCopy", "Roll", "InplaceFillScalar", "Add"),
                 {"src0": F32_F16, "src1": frozenset({"i32"}), "dst": F32_F16},
                 ((same_type, "src0 and dst types differ"),
                  (_rotated_dim_fits, "rows longer than 896 (ggml-cann), or a rotated dim D >= 896 "
                                      "(aclnnRotaryPositionEmbedding needs D < 896)"),
                  (_heads_fit, "aclnnRotaryPositionEmbedding needs B, N < 1000 (half) or "
                               "B * N < 1000 (interleave)")),
                 soc={"310P": ((_full_width, "n_dims < ne0 on 310P: ggml-cann's ASCEND_310P "
                                             "branch rotates whole rows only"),
                               (_contiguous, "non-contiguous src0 on 310P: ggml-cann's "
                                             "ASCEND_310P branch takes contiguous rows only"))},
                 calls=_CALLS,
                 changes=(From("0.25.3", ((_no_offset, "a rotated-dims offset (ggml_rope_set_offset, "
                                                       "op_params[15]): ggml-cann 0.25.3 refuses it"),)),)),
})
