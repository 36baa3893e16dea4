"""The simulator's call trace: while a recording is on, every aclnn call (its
GetWorkspaceSize and its launch, one record) and every ACL runtime call that queues work
on a stream or is refused, with what it was given and what it answered; with `data`,
each operator's inputs and outputs as it ran, for the blame (blame.py).

The records are plain JSON values (backend/trace.py reads and prints them; the native
layer records its own calls the same way on a real device). Nothing is recorded, and
nothing costs more than one test of `ON`, while no recording is on.

In a client of the simulated toolkit, CANN_SIM_TRACE=1 (read at aclInit) records every
call from then on and writes each record, once complete, into the client's stdout
(`start_stream`): `ops tbo` reads test-backend-ops' lines and the records as one stream.
"""
from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .binding import ffi, lib

from cannops.backend.trace import frame

from . import dtypes
from .state import STATE

ON = False             # a recording is on (the entry points test this and nothing else)
_REC: "Recording | None" = None
# ACL runtime calls recorded even when they succeed: the ones that queue work on a stream
STREAM_WORK = frozenset({"aclrtMemcpyAsync", "aclrtMemsetAsync", "aclrtMemcpy2dAsync"})
# ... and for a reproducer (ops repro), what it takes to make the same calls again: the
# allocations, the copies (with the bytes that crossed), the memsets and the waits
REPRO_WORK = STREAM_WORK | {"aclrtMalloc", "aclrtFree", "aclrtMemcpy", "aclrtMemset", "aclrtSynchronizeStream",
                            "aclrtSynchronizeDevice"}
RECORDED = STREAM_WORK   # what the runtime records now (entries.guarded)
DATA_LIMIT = 256 << 20   # bytes of inputs and outputs kept per recording (beyond: no blame)
CUBE_MODES = ("KEEP_DTYPE", "ALLOW_FP32_DOWN_PRECISION", "USE_FP16", "USE_HF32", "USE_FP32_ADD")


@dataclass(eq=False)
class Ran:
    """One operator's launch as it ran: its plan, its inputs before, its outputs after."""
    plan: Any   # its aclnn.Plan (aclnn.py imports this module: none back, even for types)
    inputs: list[np.ndarray]
    outputs: list[np.ndarray] = field(default_factory=list)


@dataclass(eq=False)
class Recording:
    data: bool = False
    repro: bool = False                                    # REPRO_WORK recorded, tensors' storage too
    blobs: list[bytes] = field(default_factory=list)      # repro: the bytes each copy moved
    # a stream's calls become None once written (_done): typed as the traced runs read them
    calls: list[dict] = field(default_factory=list)
    ran: dict[int, Ran] = field(default_factory=dict)     # call index -> its run (data only)
    kept: int = 0                                          # bytes in `ran`
    dropped: bool = False                                  # DATA_LIMIT reached: some runs not kept
    stream: bool = False                                   # each record written to stdout once complete
    open: list[int] = field(default_factory=list)          # stream: prepared calls not launched yet


def _recording() -> Recording:
    """The recording on (the entry points call the functions below only while ON)."""
    assert _REC is not None, "no recording on"
    return _REC


def start(data: bool = False, repro: bool = False, sites: bool = True) -> None:
    """A recording from now on; in a client of the simulated toolkit (ggml-cann, in its own
    process or in ops' through the bridge), each record with its call site (`sites`)."""
    global ON, _REC, RECORDED
    STATE.tolerated, STATE.warnings = [], []
    _REC, ON = Recording(data, repro), True
    RECORDED = REPRO_WORK if repro else STREAM_WORK
    _sites(sites)


def _sites(on: bool) -> None:
    """The toolkit's entry points keep each caller's stack while on (callsite.py)."""
    global SITES
    SITES = on and hasattr(lib, "cannsim_sites")
    if hasattr(lib, "cannsim_sites"):
        lib.cannsim_sites_on = int(SITES)


def start_stream(hello: dict, data: bool = False, sites: bool = True) -> None:
    """CANN_SIM_TRACE=1 in a toolkit client: record every call until the process ends,
    each record written to stdout (framed: backend/trace.py) as soon as it is complete
    (launched, refused, or a runtime call), after the client's own buffered output. So it
    falls after the lines the client printed before the call and before those it prints
    after: test-backend-ops prints a case's line once its calls are made, and `ops tbo`
    gives each case the records that came before its line. `hello` goes first: the
    simulator's settings, by which a reader knows its records will come. With `data`
    (CANN_SIM_BLAME=1) each operator call carries its index `i`, and once it has run, its
    own error in float64 follows as a record of its own (`replay`: that index)."""
    start(data, sites=sites)
    _recording().stream = True
    send(hello)


SITES = False          # records carry their caller's `site` (in a toolkit client)
# a streamed recording with data: how each call is evaluated once it ran (blame.evaluate_one,
# set by acl_device: blame reads this module's records)
EVALUATE: "Callable[[Ran, dict], None] | None" = None
SITE_FRAMES = 4        # frames outside the toolkit kept per record


@functools.cache
def _site_buffer():
    return ffi.new("char[]", 4096)


def _site(call: dict) -> None:
    """The client's frames that made the call (the toolkit's forwarder took them): each as
    [object path, hex offset in it], resolved when the record is shown (callsite.py)."""
    if not SITES:
        return
    buf = _site_buffer()
    if lib.cannsim_sites(buf, len(buf), SITE_FRAMES) > 0:
        call["site"] = [line.split("\t") for line in ffi.string(buf).decode(errors="replace").splitlines()]


@functools.cache
def _c_stdio():
    """The client's C stdio (cffi, ABI mode): its printf'd text not yet written."""
    import cffi
    c = cffi.FFI()
    c.cdef("int fflush(void *stream);")
    return c, c.dlopen(None)


def send(record: dict) -> None:
    """One record into the client's stdout, after what it printed so far."""
    c, libc = _c_stdio()
    libc.fflush(c.NULL)
    for f in (sys.stdout, sys.stderr):
        if f is not None:
            f.flush()
    data = frame(record)
    while data:
        data = data[os.write(1, data):]


def _done(i: int) -> None:
    """Stream: the record at `i` is complete: out, with the prepared calls before it that
    were never launched (as they are), and not kept (a process runs thousands of cases)."""
    rec = _recording()
    if not rec.stream:
        return
    for k in [*(k for k in rec.open if k < i), i]:
        if rec.calls[k] is not None:
            send(rec.calls[k])
            rec.calls[k] = None   # type: ignore[call-overload]   # written: not kept (Recording.calls)
    rec.open = [k for k in rec.open if k > i]


def stop() -> Recording:
    global ON, _REC, RECORDED
    rec, _REC, ON, RECORDED = _REC or Recording(), None, False, STREAM_WORK
    _sites(False)
    return rec


# ------------------------------------------------------------ descriptions ----

@functools.cache
def _param_names() -> dict[str, list[str]]:
    """Entry point -> its parameter names, from the .def files (the cffi types lack them)."""
    from cannops.native.build_aclnn import def_entries
    return {e.name: [a.strip() for a in e.arguments().split(",")] for e in def_entries()}


def param_names(entry: str) -> list[str]:
    """An entry point's parameter names (none where the .def files lack it)."""
    return _param_names().get(entry) or []


@functools.cache
def _constants(prefix: str) -> dict[int, str]:
    return {getattr(lib, n): n[len(prefix):] for n in dir(lib) if n.startswith(prefix)}


def _hex(ptr) -> str:
    return hex(int(ffi.cast("uintptr_t", ptr)))


def tensor_desc(t) -> dict:
    d = {"dtype": dtypes.name(t.dtype), "ne": list(t.dims), "strides": list(t.strides)}
    if t.offset:
        d["offset"] = t.offset
    if t.format != lib.ACL_FORMAT_ND:
        d["format"] = _constants("ACL_FORMAT_").get(t.format, str(t.format))
    d["addr"] = hex(t.addr)
    if _REC is not None and _REC.repro:
        d["storage"] = list(t.storage)
    return d


def _describe(ctype: str, value):
    """One argument as a JSON value: descriptors by what they hold, numbers as they are."""
    if ctype.endswith("*") and value == ffi.NULL:
        return None
    base = ctype.replace("const ", "").replace("struct ", "").strip()
    if base == "aclTensor *":
        t = STATE.tensors.objects.get(int(ffi.cast("uintptr_t", value)))
        return tensor_desc(t) if t is not None else {"dead": _hex(value)}
    if base == "aclScalar *":
        s = STATE.scalars.objects.get(int(ffi.cast("uintptr_t", value)))
        return {"scalar": _number(s.value), "dtype": dtypes.name(s.dtype)} if s else {"dead": _hex(value)}
    if base == "aclIntArray *":
        a = STATE.int_arrays.objects.get(int(ffi.cast("uintptr_t", value)))
        return {"ints": list(a)} if a is not None else {"dead": _hex(value)}
    if base == "aclTensorList *":
        items = STATE.tensor_lists.objects.get(int(ffi.cast("uintptr_t", value)))
        if items is None:
            return {"dead": _hex(value)}
        return {"list": [tensor_desc(STATE.tensors.objects[h]) if h in STATE.tensors.objects
                         else {"dead": hex(h)} for h in items]}
    if base in ("char *",):
        return ffi.string(value).decode(errors="replace")
    if base == "aclDataType":
        return dtypes.name(value)
    if base.endswith("*"):
        return _hex(value)
    return _number(value)


def _number(v):
    if isinstance(v, (bool, int, float, str)) or v is None:
        return v
    try:
        return v.item()
    except AttributeError:
        return str(v)


def _args(name: str, args) -> dict:
    types = [a.cname for a in ffi.typeof(getattr(lib, "sim_" + name)).args]
    names = _param_names().get(name) or [f"arg{i}" for i in range(len(types))]
    return {n: _describe(c, v) for n, c, v in zip(names, types, args)}


# ---------------------------------------------------------------- hooks ----

def operator_call(name: str, args) -> dict:
    """An aclnn<name>GetWorkspaceSize about to run: its record (arguments described now,
    while the descriptors they name are live)."""
    rec = _recording()
    params = args[:-2]    # without workspaceSize and executor
    call: dict[str, Any] = {"call": f"aclnn{name}", "args": _args(f"aclnn{name}GetWorkspaceSize", params)}
    _site(call)
    if rec.stream and rec.data:
        call["i"] = len(rec.calls)
    cube = call["args"].get("cubeMathType")
    if isinstance(cube, int):
        call["cube"] = CUBE_MODES[cube] if 0 <= cube < len(CUBE_MODES) else str(cube)
    rec.calls.append(call)
    return call


def prepared(call: dict, plan, workspace: int) -> None:
    rec = _recording()
    call["workspace"] = int(workspace)
    plan.call = len(rec.calls) - 1
    _rules(call)
    if rec.stream:
        rec.open.append(plan.call)


def failed(call: dict, code: int, message: str) -> None:
    rec = _recording()
    call["rc"], call["error"] = int(code), message
    _rules(call)
    _done(len(rec.calls) - 1)


def launched(plan, stream, cost: dict | None = None) -> None:
    """A launch: its record complete (with the call's cost record where counting is on)."""
    rec = _recording()
    if plan is None or getattr(plan, "call", -1) < 0 or plan.call >= len(rec.calls):
        return
    call = rec.calls[plan.call]
    if call is None:   # stream: written already (another call came before its launch)
        return
    call["stream"] = _hex(stream)
    call.setdefault("rc", 0)
    if cost is not None:
        call["cost"] = cost
    _done(plan.call)


def launch_failed(name: str, stream, code: int, message: str) -> None:
    """A launch refused (its executor already ran, a short workspace): its own record."""
    rec = _recording()
    call = {"call": f"aclnn{name}", "phase": "launch", "stream": _hex(stream), "rc": int(code), "error": message}
    _site(call)
    rec.calls.append(call)
    _done(len(rec.calls) - 1)


def runtime_call(name: str, args, code: int, message: str = "") -> None:
    """An ACL runtime call: recorded when refused, or when it queues work (STREAM_WORK)."""
    rec = _REC
    if name.startswith("aclnn") or rec is None:
        return
    call = {"call": name, "args": _args(name, args), "rc": int(code)}
    _site(call)
    if message:
        call["error"] = message
    elif rec.repro:
        _moved(name, args, call)
    _rules(call)
    rec.calls.append(call)
    _done(len(rec.calls) - 1)


def _moved(name: str, args, call: dict) -> None:
    """A reproducer's extras of a runtime call that ran: the address aclrtMalloc gave, the
    bytes a copy took from the host or gave to it (an index into the recording's blobs)."""
    rec = _recording()
    from .memory import host_bytes
    if name == "aclrtMalloc":
        call["ptr"] = _hex(args[0][0])
    elif name in ("aclrtMemcpy", "aclrtMemcpyAsync"):
        dst, _, src, count, kind = args[:5]
        host = {lib.ACL_MEMCPY_HOST_TO_DEVICE: src, lib.ACL_MEMCPY_DEVICE_TO_HOST: dst}.get(int(kind))
        if host is not None and count:
            call["data"] = len(rec.blobs)
            rec.blobs.append(bytes(host_bytes(int(ffi.cast("uintptr_t", host)), int(count))))


def _rules(call: dict) -> None:
    """The rules tolerated and the warnings since the last record (state.tolerate and
    state.warn keep them): a descriptor's (aclCreateTensor) goes with the operator call
    that takes it."""
    if STATE.tolerated:
        call["tolerated"] = list(dict.fromkeys(STATE.tolerated))
        STATE.tolerated = []
    if STATE.warnings:
        call["warnings"] = list(dict.fromkeys(STATE.warnings))
        STATE.warnings = []


def running(plan, arrays: list[np.ndarray]) -> Ran | None:
    """A traced operator starts: its inputs as gathered (copied: an in-place operator
    overwrites them). None when data is not kept."""
    rec = _recording()
    if not rec.data or getattr(plan, "call", -1) < 0:
        return None
    size = sum(a.nbytes for a in arrays) + sum(_nbytes(t) for t in plan.outputs)
    if rec.kept + size > DATA_LIMIT:
        rec.dropped = True
        return None
    rec.kept += size
    ran = Ran(plan, [np.array(a) for a in arrays])
    rec.ran[plan.call] = ran
    return ran


def _nbytes(t) -> int:
    n = 1
    for d in t.dims:
        n *= d
    return n * t.np_dtype.itemsize


def ran(r: Ran | None, plan) -> None:
    if r is None:
        return
    r.outputs = [np.array(t.array()) for t in plan.outputs]
    rec = _recording()
    if rec.stream and EVALUATE is not None:   # evaluated now and let go: a process runs many calls
        own = {"replay": plan.call}
        EVALUATE(r, own)
        del rec.ran[plan.call]
        rec.kept -= sum(a.nbytes for a in r.inputs) + sum(a.nbytes for a in r.outputs)
        send(own)
