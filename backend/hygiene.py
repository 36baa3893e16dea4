"""The device side of `ops test --poison` and `--check-inputs` (docs/hygiene.md): which
tensors a device poisons before a run and reads back after it, and what it then reports.
Shared by the CANN devices (backend/cann/device.py) and the ggml devices
(backend/ggml/device.py); each only moves the bytes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from cannops.cases.inplace import reader, writers

if TYPE_CHECKING:
    import numpy as np

    from cannops.cases.graph import Graph, Tensor

# Every byte of a poisoned output: 0xFF...FF is a NaN in f32, f16 and bf16 alike (and one
# that no arithmetic makes: a computed NaN is 0x7FC00000 or 0xFFC00000), -1 in the integer
# types, a NaN scale in a quantized block.
POISON = 0xFF


@dataclass(frozen=True)
class Hygiene:
    poison: bool = False     # op outputs filled with POISON before the run
    inputs: bool = False     # inputs read back after the run and compared

    def __bool__(self) -> bool:
        return self.poison or self.inputs


NONE = Hygiene()


def poisoned(graph: Graph) -> list[Tensor]:
    """The op nodes that own their memory (not views, not leaves): what --poison fills."""
    return [t for t in graph.nodes() if t.view_src is None]


def inputs_kept(graph: Graph, inputs: dict) -> list[Tensor]:
    """The leaves given inputs that no op of the graph writes by definition (cases/inplace.py)."""
    written = writers(graph)
    return [t for t in graph.leaves if t.index in inputs and t.index not in written and t.nbytes()]


def problems(graph: Graph, hygiene: Hygiene, before: dict, raw: Callable[[Tensor], np.ndarray],
             host: Callable[[Tensor, np.ndarray], np.ndarray] | None = None) -> list[str]:
    """--check-inputs: the inputs written into. `before`: leaf index -> the bytes uploaded;
    `raw(t)`: a leaf's bytes read back after the run, as uploaded; `host(t, bytes)`: those in
    ggml's layout, where the device's differs (CANN's q4_0 / q8_0), for the report."""
    import numpy as np
    if not hygiene.inputs:
        return []
    out = []
    for t in inputs_kept(graph, before):
        b, a = before[t.index], raw(t)
        if not np.array_equal(_flat(b)[:t.nbytes()], _flat(a)[:t.nbytes()]):   # the common case: one pass
            out += _changed(graph, t, *((host(t, b), host(t, a)) if host else (b, a)))
    return out


def unwritten(graph: Graph, hygiene: Hygiene, check: list[int],
              raw: Callable[[Tensor], np.ndarray]) -> dict[int, np.ndarray]:
    """--poison: checked node index -> the elements (blocks, if quantized) of its output
    still holding the poison after the run; `raw` as for `problems`."""
    import numpy as np
    if not hygiene.poison:
        return {}
    own = {t.index for t in poisoned(graph)}
    out = {}
    for i in check:
        t = graph.tensors[i]
        if i in own and t.nbytes():
            left = _equal_to(_elements(t, raw(t)), _elements(t, np.full(t.type.type_size, POISON, np.uint8)))
            if left.size:
                out[i] = left
    return out


def unwritten_reason(t: Tensor, left: np.ndarray, ref: np.ndarray) -> str:
    """The FAIL reason of an output's elements left holding the poison, but for those whose
    reference value is those very bytes (-1 in an integer type: "" when all are)."""
    import numpy as np
    if not t.type.is_quantized:
        want = np.asarray(ref).reshape(-1)[left].astype(t.type.dtype)
        left = left[(want.view(np.uint8).reshape(left.size, -1) != POISON).any(axis=1)]
    if not left.size:
        return ""
    return (f"[{t.op_desc}] {left.size} of {_unit(t, t.nbytes() // t.type.type_size)} left unwritten "
            f"(still the poison {POISON:#04x} bytes), first at index {int(left[0])}")


def _flat(data) -> np.ndarray:
    import numpy as np
    return np.ascontiguousarray(data).view(np.uint8).reshape(-1)


UINT = {1: "u1", 2: "u2", 4: "u4", 8: "u8"}


def _elements(t: Tensor, data) -> np.ndarray:
    """A tensor's bytes, one item per element (per block for a quantized type): an unsigned
    integer of the element's size where there is one (compared in one pass), else a row."""
    b = _flat(data)[:t.nbytes()]
    size = t.type.type_size
    return b.view(UINT[size]) if size in UINT and not t.type.is_quantized else b.reshape(-1, size)


def _equal_to(items: np.ndarray, one: np.ndarray) -> np.ndarray:
    """The indices of the items (of _elements) equal to `one` (a single item)."""
    import numpy as np
    if items.ndim == 1:
        return np.flatnonzero(items == one[0])
    return np.flatnonzero((items == one).all(axis=1))


def _unit(t: Tensor, n: int) -> str:
    return f"{n} {'blocks' if t.type.is_quantized else 'elements'}"


def _changed(graph: Graph, t: Tensor, before, after) -> list[str]:
    import numpy as np

    from cannops.cases.inputs import values
    b, a = _elements(t, before), _elements(t, after)
    diff = np.flatnonzero(a != b if a.ndim == 1 else (a != b).any(axis=1))
    if not diff.size:
        return []
    i = int(diff[0])
    k = i * t.type.blck_size   # the first element of that block (the element itself if not quantized)
    was, now = (values(t, _flat(x)).reshape(-1)[k] for x in (before, after))
    return [f"wrote into {reader(graph, t)}: {diff.size} of {_unit(t, len(b))} changed, first at "
            f"index {i}: {number(was)} -> {number(now)}"]


def number(v) -> str:
    """An element for a reader: 9 significant digits (an f32's), an integer as it is."""
    return str(int(v)) if v.dtype.kind in "iu" else f"{float(v):.9g}"
