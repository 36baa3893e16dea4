"""Rules of GATED_LINEAR_ATTN and SOLVE_TRI (native/aclnn/ops_recurrent.c)."""
from __future__ import annotations

from .rules import RULES, Rule

F32 = frozenset({"f32"})


def _contiguous_sources(node) -> bool:
    return all(s.is_contiguous() for s in node.src)


RULES.update({
    # ggml-cann accepts any GATED_LINEAR_ATTN; its handler reads f32-sized contiguous
    # slices (ggml_gated_linear_attn itself asserts contiguity; ggml-cpu computes only f32)
    "GATED_LINEAR_ATTN": Rule(("InplaceCopy", "Mul", "InplaceMul", "InplaceAdd", "Mv", "InplaceMuls"),
                              {f"src{i}": F32 for i in range(5)} | {"dst": F32},
                              ((_contiguous_sources, "the handler slices contiguous k, v, q, g and state"),)),
    # as ggml-cann: f32 A (ggml_solve_tri asserts f32 and contiguous A and B)
    "SOLVE_TRI": Rule(("TriangularSolve",), {"src0": F32, "src1": F32, "dst": F32}),
})
