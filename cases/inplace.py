"""Which of a case's inputs its ops may write by ggml's definition, for `ops test
--check-inputs` (docs/hygiene.md): every other input must hold after the run what it held
before.

ggml's own rule covers nearly all of them: an op node that is a view of a source
(ggml_view_tensor turned into an op: the `_inplace` constructors, SET_ROWS, CPY, SET / ACC
with inplace, OPT_STEP_*) writes its result into that source's memory. A few ops write into
other sources too; they are listed here, and only here.
"""
from __future__ import annotations

from .graph import Graph, Tensor

# op -> the src slots it updates besides its own view (ggml-cpu's forward of each)
ALSO_WRITES: dict[str, tuple[int, ...]] = {
    "OPT_STEP_ADAMW": (2, 3),   # the moments m and v are updated in place, with the parameter
}


def writers(graph: Graph) -> dict[int, Tensor]:
    """Leaf index -> the first op node that may write it, for each leaf some op of the
    graph writes by definition."""
    out: dict[int, Tensor] = {}
    for node in graph.nodes():
        targets = [] if node.is_view() or node.view_src is None else [node.view_src]
        targets += [node.src[k] for k in ALSO_WRITES.get(node.op, ()) if k < len(node.src)]
        for t in targets:
            if t is not None and t.base.is_leaf():
                out.setdefault(t.base.index, node)
    return out


def reader(graph: Graph, leaf: Tensor) -> str:
    """The leaf as its first reader sees it, e.g. "src[1] of MUL_MAT (b)": how a FAIL names
    an input written into."""
    name = f" ({leaf.name})" if leaf.name else ""
    for node in graph.nodes():
        for k, s in enumerate(node.src):
            if s is not None and s.base is leaf and not node.is_view():
                return f"src[{k}] of {node.op_desc}{name}"
    return f"leaf #{leaf.index}{name}"
