"""The NumPy reference: interprets a case graph node by node, in ggml's memory model.

Every tensor that owns memory (a leaf or an op node) gets a byte buffer of ggml_nbytes;
views read and write their base's buffer through their own `nb` strides, so permutes,
views, in-place copies and partial writes behave as they do in ggml. Each op's reference
is a vectorised NumPy function registered with @reference("OP") (or "UNARY:SILU",
"GLU:SWIGLU" for sub-ops) in this package's modules.
"""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

import numpy as np

from cannops.cases.graph import Graph, Tensor

REFERENCES: dict[str, Callable] = {}


def reference(*ops: str):
    def deco(fn):
        for op in ops:
            REFERENCES[op] = fn
        return fn
    return deco


def ref_key(t: Tensor) -> str:
    return f"{t.op}:{t.op_desc}" if t.op in ("UNARY", "GLU") else t.op


def has_reference(t: Tensor) -> bool:
    return t.is_view() or ref_key(t) in REFERENCES


class Memory:
    """Byte buffers of one graph, and typed strided views onto them."""

    def __init__(self):
        self.buffers: dict[int, np.ndarray] = {}

    def alloc(self, t: Tensor) -> None:
        if t.index not in self.buffers:
            self.buffers[t.index] = np.zeros(t.nbytes(), dtype=np.uint8)

    def raw(self, t: Tensor) -> np.ndarray:
        """The tensor's storage as an ndarray of its element type (uint8 blocks when quantized)."""
        buf = self.buffers[t.base.index]
        if t.type.is_quantized:
            shape = (t.ne[3], t.ne[2], t.ne[1], t.type.row_size(t.ne[0]))
            strides = (t.nb[3], t.nb[2], t.nb[1], 1)
            return np.ndarray(shape, np.uint8, buf, t.view_offs, strides)
        return np.ndarray(tuple(reversed(t.ne)), t.type.dtype, buf, t.view_offs, tuple(reversed(t.nb)))

    def read(self, t: Tensor) -> np.ndarray:
        """Logical values (shape ne[::-1]); quantized tensors are dequantized to f32."""
        arr = self.raw(t)
        if t.type.is_quantized:
            from gguf.quants import dequantize
            return dequantize(np.ascontiguousarray(arr), t.type.qtype)
        return arr

    def write(self, t: Tensor, values: np.ndarray) -> None:
        dst = self.raw(t)
        if t.type.is_quantized:
            from gguf.quants import quantize
            values = quantize(np.broadcast_to(values, t.ne[::-1]).astype(np.float32), t.type.qtype)
            dst[...] = values
            return
        with np.errstate(all="ignore"):
            if t.type.is_int and np.asarray(values).dtype.kind == "f":
                values = np.asarray(values)
            dst[...] = np.asarray(values).astype(t.type.dtype, copy=False)


def compute(g: Graph, inputs: dict[int, np.ndarray]) -> Memory:
    """Run the whole graph; returns the memory, from which any tensor can be read."""
    _load_all()
    mem = Memory()
    for t in g.leaves:
        mem.alloc(t)
        mem.raw(t)[...] = inputs[t.index]
    for node in g.nodes():
        if node.view_src is None:
            mem.alloc(node)
        if node.is_view():
            continue
        fn = REFERENCES.get(ref_key(node))
        if fn is None:
            raise NotImplementedError(f"no NumPy reference for {ref_key(node)}")
        srcs = [mem.read(s) for s in node.src]
        with np.errstate(all="ignore"):
            result = fn(node, *srcs)
        mem.write(node, result)
    return mem


def f32(x: np.ndarray) -> np.ndarray:
    """Upcast for computation: ggml's CPU computes f16/bf16 ops in f32."""
    return np.asarray(x, dtype=np.float32)


_loaded = False


def _load_all():
    global _loaded
    if not _loaded:
        _loaded = True
        for m in sorted(m.name for m in pkgutil.iter_modules(__path__)):
            importlib.import_module(f"{__name__}.{m}")
