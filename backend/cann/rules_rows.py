"""Rule of SET_ROWS (native/aclnn/ops_rows.c)."""
from __future__ import annotations

from .rules import RULES, Rule, no_bf16

RULES.update({
    # ggml-cann's supports_op: f32 / f16 / bf16 destinations (bf16 not on 310P), any row
    # and id type ggml allows. ggml-cann scatters f16 rows into an f32 destination without
    # converting them; the handler here casts them first, so that case is supported too.
    "SET_ROWS": Rule(("Cast", "InplaceIndexCopy"),
                     {"src0": frozenset({"f32", "f16"}), "src1": frozenset({"i32", "i64"}),
                      "dst": frozenset({"f32", "f16", "bf16"})},
                     soc={"310P": ((no_bf16, "bf16 dst on 310P: ggml-cann's ASCEND_310P branch "
                                             "leaves BF16 out of SET_ROWS"),)}),
})
