"""Rule of CROSS_ENTROPY_LOSS (native/aclnn/ops_training.c)."""
from __future__ import annotations

from .rules import RULES, Rule

F32 = frozenset({"f32"})


def _contiguous_rows(node) -> bool:
    return all(s.is_contiguous() for s in node.src)


RULES.update({
    # ggml-cann accepts any CROSS_ENTROPY_LOSS but views logits and labels as contiguous
    # f32 [rows, classes] matrices: other types or layouts would be read wrongly
    "CROSS_ENTROPY_LOSS": Rule(("SoftmaxCrossEntropyWithLogits", "ReduceSum", "Muls"),
                               {"src0": F32, "src1": F32, "dst": F32},
                               ((_contiguous_rows, "logits and labels must be contiguous"),)),
})
