"""Device work counted on the simulator: per aclnn call a cost record (its unit, dtype,
FLOPs by its operator's registered formula, bytes read and written, workspace), and the
runtime's allocations, copies, synchronisations and graph captures and replays, as
events that backend/cost.py sums into a case's `cost`.

Each simulated operator registers its unit and FLOP formula with `@operator(name, ...)`
(aclnn.py); the formulas (docs/device-work.md):
  * cube operators (matmul, batch matmul, convolution, flash attention): 2 FLOPs per
    multiply-add: matmul 2·|out|·K, convolution 2·|out side|·|one filter|, attention
    2·B·N·Sq·Skv·(Dk + Dv);
  * vector operators: k FLOPs per element of the largest tensor the call touches (k = 1
    unless its registration says otherwise: softmax 5, RMS norm 4, ...); operators that
    only move or convert data register `MOVES` (0).
A view's bytes are the elements it names (its dims) times the element size, never its
base; a broadcast operand counts once. A call launched into a stream capture is a call
of the host but no kernel until the model replays it (aclmdlRIExecuteAsync).

Counting is on while a recording runs (`start` / `stop`: ops' own layer, per case) or in
a toolkit client with CANN_SIM_COST=1 (read at aclInit, with CANN_SIM_TRACE=1): there
each event goes out framed with the trace's records (an aclnn call's as its record's
`cost`), for `ops tbo --cost` to sum case by case. While it is off, each hook costs one
test of `ON`.
"""
from __future__ import annotations

import contextlib
import math
from typing import Callable

from .binding import ffi, lib

from cannops.backend.cost import COST_SWITCH  # noqa: F401 - read at aclInit (acl_device.py)

from . import dtypes

ON = False
CUBE, VECTOR = "cube", "vector"
_EVENTS: list[dict] | None = None   # the recording in progress (None: none, or streamed)
_STREAM = False                     # events written into the client's stdout (a toolkit client)

# aclnn operator name (without "aclnn") -> (unit, FLOPs of a plan)
FORMULAS: dict[str, tuple[str, Callable[[object], int]]] = {}


def elements(t) -> int:
    return math.prod(t.dims)


def nbytes(t) -> int:
    """The bytes a view touches: its elements, packed types (INT4) at their density."""
    n = math.prod(t.dims)
    per_byte = dtypes.PACKED.get(t.dtype)
    return -(-n // per_byte) if per_byte else n * t.np_dtype.itemsize


def per_element(k: int = 1) -> Callable[[object], int]:
    """k FLOPs per element of the largest tensor the call touches (its output for an
    element-wise operator, its input for a reduction)."""
    def flops(plan) -> int:
        return k * max((elements(t) for t in (*plan.inputs, *plan.outputs)), default=0)
    flops.__doc__ = f"{k} per element of the largest tensor"
    return flops


ELEMENTWISE = per_element(1)


def moves(plan) -> int:
    """Data movement and conversion: no arithmetic."""
    return 0


def matmul_flops(plan) -> int:
    """2·|out|·K, K the first operand's last dim (self [.., M, K], x [M, K], a vector [K])."""
    return 2 * elements(plan.outputs[0]) * plan.inputs[0].dims[-1]


def register(name: str, unit: str = VECTOR, flops: Callable[[object], int] = ELEMENTWISE) -> None:
    if unit not in (CUBE, VECTOR):
        raise ValueError(f"aclnn{name}: unit {unit!r}")
    FORMULAS[name] = (unit, flops)


def _dtype_name(acl: int) -> str:
    return "int4" if acl == lib.ACL_INT4 else str(dtypes.numpy_dtype(acl))


def record(plan) -> dict:
    """The call's cost record (the interface with backend/cann/perf_model.py)."""
    unit, flops = FORMULAS.get(plan.name, (VECTOR, ELEMENTWISE))
    reads = (*plan.inputs, *plan.reads)
    # the type it computes in: a cube's operands', a vector unit's result's
    lead = (reads or plan.outputs) if unit == CUBE else (plan.outputs or reads)
    return {"op": f"aclnn{plan.name}", "unit": unit,
            "dtype": _dtype_name(lead[0].dtype) if lead else "",
            "flops": int(flops(plan)), "bytes_read": sum(nbytes(t) for t in reads),
            "bytes_written": sum(nbytes(t) for t in plan.outputs), "workspace": int(plan.workspace)}


# ------------------------------------------------------------------ recording ----

def start() -> None:
    global ON, _EVENTS, _STREAM
    ON, _EVENTS, _STREAM = True, [], False


def start_stream() -> None:
    """A toolkit client (CANN_SIM_COST=1 beside CANN_SIM_TRACE=1): events go out framed."""
    global ON, _EVENTS, _STREAM
    ON, _EVENTS, _STREAM = True, None, True


def stop() -> list[dict]:
    global ON, _EVENTS, _STREAM
    events, ON, _EVENTS, _STREAM = _EVENTS or [], False, None, False
    return events


@contextlib.contextmanager
def paused():
    """Calls made inside are not counted (a pool's housekeeping, which depends on the cases
    before: ops' layer counts the blocks a case takes from its pool instead)."""
    global ON
    was, ON = ON, False
    try:
        yield
    finally:
        ON = was


def _event(name: str, cost: dict) -> None:
    if _STREAM:
        from . import trace
        trace.send({"call": name, "cost": cost})
    elif _EVENTS is not None:
        _EVENTS.append({"call": name, "cost": cost})


def launched(plan, stream) -> dict | None:
    """An aclnn launch (checked): a call of the host; a kernel now, or, launched into a
    capture, one of the model's kernels (kept on the capture whether or not counting is
    on, counted per replay). Streamed, the record is returned for the call's trace record
    to carry as its `cost`."""
    rec = record(plan)
    if stream.capture is not None:
        stream.capture.work.append(rec)
        rec = {**rec, "captured": True}
    if _STREAM:
        return rec
    _event(rec["op"], rec)
    return None


# the runtime calls counted, by what they count (entries.guarded calls `runtime`)
_COPY_KINDS = {lib.ACL_MEMCPY_HOST_TO_DEVICE: "h2d", lib.ACL_MEMCPY_DEVICE_TO_HOST: "d2h",
               lib.ACL_MEMCPY_DEVICE_TO_DEVICE: "d2d", lib.ACL_MEMCPY_HOST_TO_HOST: "h2h"}


def _copy(count, kind) -> dict:
    return {"copy": _COPY_KINDS.get(int(kind), str(int(kind))), "bytes": int(count)}


def _model_work(handle) -> list[dict]:
    from .state import STATE
    m = STATE.models.objects.get(int(ffi.cast("uintptr_t", handle)))
    return getattr(m, "work", []) if m is not None else []


RUNTIME: dict[str, Callable[..., dict]] = {
    "aclrtMalloc": lambda ptr, size, policy: {"alloc": int(size)},
    "aclrtFree": lambda ptr: {"free": 1},
    "aclrtMallocPhysical": lambda handle, size, prop, flags: {"alloc": int(size)},
    "aclrtFreePhysical": lambda handle: {"free": 1},
    "aclrtMemcpy": lambda dst, dmax, src, count, kind: _copy(count, kind),
    "aclrtMemcpyAsync": lambda dst, dmax, src, count, kind, stream: _copy(count, kind),
    "aclrtSynchronizeStream": lambda stream: {"sync": 1},
    "aclrtSynchronizeDevice": lambda: {"sync": 1},
    "aclrtSynchronizeEvent": lambda event: {"sync": 1},
    "aclmdlRICaptureEnd": lambda stream, model: {"captured": len(_model_work(model[0]))},
    "aclmdlRIExecuteAsync": lambda model, stream: {"replay": summary(_model_work(model))},
}


def runtime(name: str, args) -> None:
    """A runtime call that succeeded: its event, where it counts."""
    what = RUNTIME.get(name)
    if what is not None:
        _event(name, what(*args))


def summary(work: list[dict]) -> dict:
    """A model's kernels, summed: what each replay runs."""
    flops = {CUBE: 0, VECTOR: 0}
    for r in work:
        flops[r["unit"]] += r["flops"]
    return {"kernels": len(work), "bytes_read": sum(r["bytes_read"] for r in work),
            "bytes_written": sum(r["bytes_written"] for r in work), "flops": flops}
