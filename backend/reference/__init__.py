"""The NumPy reference: interprets a case graph node by node, in ggml's memory model.

Every tensor that owns memory (a leaf or an op node) gets a byte buffer of ggml_nbytes;
views read and write their base's buffer through their own `nb` strides, so permutes,
views, in-place copies and partial writes behave as they do in ggml. Each op's reference
is a vectorised NumPy function registered with @reference("OP") (or "UNARY:SILU",
"GLU:SWIGLU" for sub-ops) in this package's modules.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from cannops.cases import quants
from cannops.cases.graph import Graph, Tensor
from cannops.cases.inputs import stored_view, values
from cannops.cases.plugins import load_plugins

NAME = "NUMPY"  # the reference's device name, named in `not supported [NUMPY]`
REFERENCES: dict[str, Callable] = {}
RAW: dict[str, Callable] = {}  # op -> raw(node, *srcs as stored): block-level form (see below)
STORED: dict[str, tuple[int, ...]] = {}   # op -> the sources fn gets as stored (see below)


def reference(*ops: str, raw: Callable | None = None, stored: tuple[int, ...] = ()):
    """Register fn(node, *srcs) -> values as the reference of `ops`.

    raw(node, *srcs) -> data as stored: used instead of fn when the node and all its sources
    share one quantized type, so that moving quantized blocks (CPY, CONCAT) copies them bit
    for bit instead of dequantizing and quantizing again. `stored`: the sources that fn
    gets as stored (Memory.raw: blocks when quantized), to decode only the part it uses, a
    part at a time (MUL_MAT_ID's experts: 128 q4_K experts decoded whole were 4 GiB)."""
    def deco(fn):
        for op in ops:
            REFERENCES[op] = fn
            if raw is not None:
                RAW[op] = raw
            if stored:
                STORED[op] = stored
        return fn
    return deco


def has_reference(t: Tensor) -> bool:
    load_all()
    return t.is_view() or t.op_key in REFERENCES


def unsupported(t: Tensor) -> str | None:
    """Why the reference cannot compute node t (None: it can): no reference, or a quantized
    type that cases/quants.py cannot decode (a source) or encode (the node's own output).
    Leaves of types it cannot encode are made by libggml's quantizer (cases/inputs.py), as
    test-backend-ops makes them, so only decoding is needed for them."""
    if t.is_view():
        return None
    if not has_reference(t):
        return f"no reference for {t.op_key}"
    if t.op_key in RAW and t.type.is_quantized and all(s is None or s.type == t.type for s in t.src):
        # blocks are moved bit for bit; reading them back for comparison still decodes
        return quants.missing(t.type, "dequantize")
    for s in t.src:
        why = s is not None and s.type.is_quantized and quants.missing(s.type, "dequantize")
        if why:
            return why
    return t.type.is_quantized and quants.missing(t.type, "quantize") or None


class Rows(NamedTuple):
    """A reference's partial result: only the rows where `mask` (shape ne3, ne2, ne1) is set
    are written (ops that write some rows of their destination in place, e.g. SET_ROWS).
    A quantized destination gets just those rows quantized; the others keep their blocks."""
    values: np.ndarray
    mask: np.ndarray


class Memory:
    """Byte buffers of one graph, and typed strided views onto them."""

    def __init__(self):
        self.buffers: dict[int, np.ndarray] = {}

    def alloc(self, t: Tensor) -> None:
        if t.index not in self.buffers:
            self.buffers[t.index] = np.zeros(t.nbytes(), dtype=np.uint8)

    def share(self, t: Tensor, data: np.ndarray) -> bool:
        """Take a leaf's input as its buffer, not a copy of it (one copy of each leaf: 1 GiB
        for MUL_MAT_HADAMARD's 16384 x 16384), where the input is the leaf's storage byte for
        byte; the caller shares only leaves that no node writes into."""
        stored = np.uint8 if t.type.is_quantized else t.type.dtype
        if (t.view_src is not None or not t.is_contiguous() or data.dtype != stored
                or not data.flags.c_contiguous or data.nbytes != t.nbytes() or data.nbytes == 0):
            return False
        buf = data.reshape(-1).view(np.uint8)
        buf.flags.writeable = False   # a reference that wrote into its source would change the device's input
        self.buffers[t.index] = buf
        return True

    def raw(self, t: Tensor) -> np.ndarray:
        """The tensor's storage as an ndarray of its element type (uint8 blocks when quantized)."""
        return stored_view(t, self.buffers[t.base.index], t.view_offs)

    def read(self, t: Tensor) -> np.ndarray:
        """Logical values (shape ne[::-1]); quantized tensors are dequantized to f32."""
        return values(t, self.buffers[t.base.index], t.view_offs)

    def write(self, t: Tensor, values: np.ndarray, rows: np.ndarray | None = None) -> None:
        """Store values (shape ne[::-1]); with `rows` (a mask of shape ne3, ne2, ne1) only those rows."""
        if rows is not None and not rows.any():
            return  # nothing to write (gguf's quantizers refuse empty arrays)
        dst = self.raw(t)
        if t.type.is_quantized:
            values = np.broadcast_to(values, t.ne[::-1]).astype(np.float32)
            if rows is None:
                dst[...] = quants.quantize(values, t.type)
            else:
                dst[rows] = quants.quantize(np.ascontiguousarray(values[rows]), t.type)
            return
        with np.errstate(all="ignore"):
            values = np.asarray(values).astype(t.type.dtype, copy=False)
            if rows is None:
                dst[...] = values
            else:
                dst[rows] = np.broadcast_to(values, dst.shape)[rows]


def compute(g: Graph, inputs: dict[int, np.ndarray]) -> Memory:
    """Run the whole graph; returns the memory, from which any tensor can be read."""
    load_all()
    mem = Memory()
    written = {n.view_src.index for n in g.nodes() if n.view_src is not None and not n.is_view()}
    for t in g.leaves:
        if t.index not in written and mem.share(t, inputs[t.index]):
            continue
        mem.alloc(t)
        mem.raw(t)[...] = inputs[t.index]
    for node in g.nodes():
        if node.view_src is None:
            mem.alloc(node)
        if node.is_view():
            continue
        fn = REFERENCES.get(node.op_key)
        if fn is None:
            raise NotImplementedError(f"no NumPy reference for {node.op_key}")
        raw = RAW.get(node.op_key)
        if raw is not None and node.type.is_quantized and all(
                s is None or s.type == node.type for s in node.src):
            mem.raw(node)[...] = raw(node, *[None if s is None else mem.raw(s) for s in node.src])
            continue
        as_stored = STORED.get(node.op_key, ())
        srcs = [None if s is None else mem.raw(s) if k in as_stored else mem.read(s)
                for k, s in enumerate(node.src)]  # None: absent optional src
        with np.errstate(all="ignore"):
            result = fn(node, *srcs)
        if isinstance(result, Rows):
            mem.write(node, result.values, result.mask)
        else:
            mem.write(node, result)
    return mem


def f32(x: np.ndarray) -> np.ndarray:
    """Upcast for computation: ggml's CPU computes f16/bf16 ops in f32."""
    return np.asarray(x, dtype=np.float32)


def load_all() -> None:
    """Import every op module of the reference (each registers its ops)."""
    load_plugins(__name__)
