"""A recording stand-in for the guarded ggml lib: while a case graph is replayed through it
(device.py's `replay`), every ggml_* call the replays make is passed on and written down
as a C statement, with tensor variables for the tensors it returns, so that `ops repro`
can rebuild the same graph with ggml's own C API (cli/engine/repro.py)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cannops.backend.repro import c_string

from .library import ffi, lib

NULL = ffi.NULL
TENSOR = "struct ggml_tensor *"
MAX_SRC = 10   # GGML_MAX_SRC: a tensor built on the way is found through its src links


@dataclass
class GraphProgram:
    """A case run on a ggml device through a Recorder: the C statements that build its
    graph (in a context `ctx`), the variables of its leaves and checked tensors (by node
    index), the context's room (n_objs tensors, a graph of graph_size nodes), and the
    outputs it computed, as bytes and as values."""
    lines: list[str]
    leaves: dict[int, str]
    checked: dict[int, str]
    out: str
    n_objs: int
    graph_size: int
    raw: dict[int, np.ndarray]
    outputs: dict[int, np.ndarray]
    n_threads: int


class Recorder:
    """Passes each call on to `inner` (the guarded lib), then records it: `lines` (C
    statements, one a call) and `var(ptr)` (the C expression of a tensor)."""

    def __init__(self, inner):
        self._inner = inner
        self.ffi = ffi
        self.lines: list[str] = []
        self._vars: dict[int, str] = {}

    def __getattr__(self, name: str):
        value = getattr(self._inner, name)      # AttributeError passes: hasattr() works
        if not name.startswith("ggml_") or not callable(value):
            return value
        ctype = ffi.typeof(getattr(lib, name))

        def call(*args):
            result = value(*args)
            self._record(name, ctype, args, result)
            return result
        call.__name__ = name
        setattr(self, name, call)
        return call

    def var(self, ptr) -> str:
        """The C expression of a ggml tensor: its variable, or (a tensor a constructor built
        on the way) a new variable reached from a known one through src / view_src."""
        key = int(ffi.cast("uintptr_t", ptr))
        if key in self._vars:
            return self._vars[key]
        for known, name in list(self._vars.items()):
            t = ffi.cast(TENSOR, known)
            links = [(f"{name}->src[{i}]", t.src[i]) for i in range(MAX_SRC)] + [(f"{name}->view_src", t.view_src)]
            for expr, p in links:
                if p != NULL and int(ffi.cast("uintptr_t", p)) == key:
                    return self._bind(ptr, expr)
        raise ValueError(f"a ggml tensor reached by no recorded call ({ffi.string(ptr.name).decode()!r})")

    def _bind(self, ptr, expr: str) -> str:
        name = f"t{len(self._vars)}"
        self._vars[int(ffi.cast("uintptr_t", ptr))] = name
        self.lines.append(f"struct ggml_tensor * {name} = {expr};")
        return name

    def _record(self, name: str, ctype, args, result) -> None:
        call = f"{name}({', '.join(self._arg(t, a) for t, a in zip(ctype.args, args))})"
        if ctype.result.cname == TENSOR and result != NULL:
            key = int(ffi.cast("uintptr_t", result))
            if key in self._vars:          # ggml_set_name and the like return their argument
                self.lines.append(call + ";")
            else:
                self._bind(result, call)
        else:
            self.lines.append(call + ";")

    def _arg(self, ctype, value) -> str:
        if ctype.cname == "struct ggml_context *":
            return "ctx"
        if isinstance(value, ffi.CData) and ctype.kind == "pointer" and value == NULL:
            return "NULL"
        if ctype.cname == TENSOR:
            return self.var(value)
        if ctype.kind == "enum":
            return ctype.elements.get(int(value), str(int(value)))
        if ctype.kind == "pointer":
            return _array(ctype, value)
        if ctype.cname == "_Bool":
            return "true" if value else "false"
        if ctype.cname in ("float", "double"):
            return c_float(float(value), ctype.cname == "float")
        return str(int(value))


def _array(ctype, value) -> str:
    """A pointer argument: a string, or an array (a Python sequence or a cffi array)."""
    item = ctype.item.cname
    if item == "char":
        return c_string(ffi.string(value) if isinstance(value, ffi.CData) else value)
    if isinstance(value, ffi.CData):
        if ffi.typeof(value).kind != "array":
            raise ValueError(f"a pointer argument of unknown length ({ffi.typeof(value).cname})")
        value = list(value)
    if item in ("float", "double"):
        items = [c_float(float(v), item == "float") for v in value]
    else:
        items = [str(int(v)) for v in value]
    return f"({item.replace('const ', '')}[]){{{', '.join(items)}}}"


def c_float(v: float, single: bool) -> str:
    """A C literal that is exactly v (as a float when `single`)."""
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    text = repr(v) if not single else str(np.float32(v))   # the shortest that reads back the same
    if "." not in text and "e" not in text and "inf" not in text:
        text += ".0"
    return text + ("f" if single else "")

