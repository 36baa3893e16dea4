"""The simulator's one state (STATE): the simulated SoC and what aclInit reads from the
environment, the opaque handles of every kind of object, the current context per thread,
and the rules that refuse, tolerate or report leaks against it.

Handles (streams, events, descriptors, executors, physical memory, models) are opaque
addresses that are never reused, so a destroyed handle is recognised as such."""
from __future__ import annotations

import itertools
import os
import sys
import threading

from .binding import ffi, lib

from .memory import ALIGN, DeviceMemory
from .refusals import LOG_REFUSALS, SimError

# The simulated SoC, whose aclnn rules the simulator follows: CANN_SIM_SOC picks it (read
# at aclInit), by the name aclrtGetSocName reports; operators ask soc_family().
SOCS = {"Ascend910B1": "910B", "Ascend910B2": "910B", "Ascend910B3": "910B",
        "Ascend910B4": "910B", "Ascend310P1": "310P", "Ascend310P3": "310P"}
DEFAULT_SOC = "Ascend910B3"
DEVICE_COUNT = 1
DEVICE_MEMORY = 8 << 30           # bytes of simulated device memory
HOST_PINNED = 4 << 30             # bytes of aclrtMallocHost memory


class Handles:
    """Opaque handles: addresses that are never reused, per kind of object."""

    def __init__(self, kind: str, base: int):
        self.kind = kind
        self.objects: dict[int, object] = {}
        self._next = itertools.count(base, 16)

    def new(self, obj) -> int:
        h = next(self._next)
        self.objects[h] = obj
        return h

    def get(self, ptr, what: str, code: int | None = None):
        if ptr == ffi.NULL:
            raise SimError(code or lib.ACLNN_ERR_PARAM_NULLPTR, f"{what}: {self.kind} is nullptr")
        h = int(ffi.cast("uintptr_t", ptr))
        obj = self.objects.get(h)
        if obj is None:
            raise SimError(code or lib.ACLNN_ERR_PARAM_INVALID,
                           f"{what}: {h:#x} is not a live {self.kind} (destroyed, or never created)")
        return obj

    def pop(self, ptr, what: str):
        obj = self.get(ptr, what)
        del self.objects[int(ffi.cast("uintptr_t", ptr))]
        return obj


class State:
    def __init__(self):
        self.initialised = False
        self.finalised = False
        self.device_refs = [0] * DEVICE_COUNT
        self.contexts = Handles("aclrtContext", 0x5D_0000_0000)
        self.device_context: dict[int, int] = {}     # device -> its default context
        # the current context is per thread (acl_rt.h): thread ident -> context handle
        self.current: dict[int, int] = {}
        self.memory = DeviceMemory(DEVICE_MEMORY)
        self.host = DeviceMemory(HOST_PINNED, "aclrtMallocHost", "aclrtFreeHost")
        self.streams = Handles("aclrtStream", 0x5E_0000_0000)
        self.default_streams: dict = {}   # device -> its default (NULL) streams.Stream
        self.allowed: frozenset[str] = frozenset()      # CANN_SIM_ALLOW
        self.seed = os.getpid()                         # CANN_SIM_SEED
        self.events = Handles("aclrtEvent", 0x5F_0000_0000)
        self.tensors = Handles("aclTensor", 0x7E_0000_0000)
        self.scalars = Handles("aclScalar", 0x7F_0000_0000)
        self.int_arrays = Handles("aclIntArray", 0x80_0000_0000)
        self.tensor_lists = Handles("aclTensorList", 0x82_0000_0000)   # -> tensor handles
        self.executors = Handles("aclOpExecutor", 0x81_0000_0000)
        self.physical = Handles("aclrtDrvMemHandle", 0x83_0000_0000)
        self.models = Handles("aclmdlRI", 0x84_0000_0000)
        self.peer_access: set[tuple[int, int]] = set()   # (device, peer) enabled
        self.soc = ""                       # the simulated SoC, fixed at aclInit
        self.check_inputs = False           # CANN_SIM_CHECK_INPUTS (sim/hygiene.py), read at aclInit
        self.fault: str | None = None       # CANN_SIM_FAULT (sim/faults.py), read at aclInit
        self.last_error = ""
        self.tolerated: list[str] = []      # the rules tolerated last, latest last (few kept)
        self.warned: set[str] = set()        # the operators' warnings printed so far
        self.warnings: list[str] = []       # the warnings since the last traced call
        self.leaks: list[str] = []          # what device close / aclFinalize found still held
        self.reported: set[int] = set()     # ids of the objects a leak report named already
        self._keep: list = []               # C strings handed out

    def c_string(self, text: str):
        s = ffi.new("char[]", text.encode())
        self._keep = self._keep[-7:] + [s]
        return s


STATE = State()


def current_device() -> int | None:
    """The device of this thread's current context (None: none, or it was destroyed)."""
    ctx = STATE.current.get(threading.get_ident())
    return STATE.contexts.objects.get(ctx) if ctx is not None else None


def soc_family() -> str:
    """The simulated SoC's family, "910B" (Atlas A2) or "310P" (Atlas inference series),
    for operators whose aclnn pages differ between them."""
    return SOCS[STATE.soc or soc_from_env()]


MAX_ALIGN = 1 << 21   # a huge page; more would only make every allocation fail


def align_from_env() -> int:
    text = os.environ.get("CANN_SIM_MALLOC_ALIGN", "") or str(ALIGN)
    if not text.isdigit() or not ALIGN <= int(text) <= MAX_ALIGN or int(text) & (int(text) - 1):
        raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                       f"CANN_SIM_MALLOC_ALIGN={text[:40]!r} is not a power of two in [{ALIGN}, {MAX_ALIGN}]")
    return int(text)


def soc_from_env() -> str:
    name = os.environ.get("CANN_SIM_SOC", "") or DEFAULT_SOC
    if name not in SOCS:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                       f"CANN_SIM_SOC={name!r} is not a simulated SoC (one of {', '.join(SOCS)})")
    return name


def seed_from_env() -> int:
    """CANN_SIM_SEED: the seed of what the docs leave open (the order aclnnArgsort gives
    equal keys). By default it changes per process, so that a client relying on one
    such choice fails some runs; a run is replayed by setting the seed it printed."""
    text = os.environ.get("CANN_SIM_SEED", "")
    if not text:
        return os.getpid()
    try:
        return int(text, 0)
    except ValueError:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"CANN_SIM_SEED={text!r} is not an integer") from None


def need_device(what: str) -> int:
    """Runtime calls that create or touch device resources need a current context on
    the calling thread: aclrtSetDevice or aclrtSetCurrentContext made in that thread."""
    if not STATE.initialised:
        raise SimError(lib.ACL_ERROR_UNINITIALIZE, f"{what}: aclInit has not been called")
    d = current_device()
    if d is None:
        raise SimError(lib.ACL_ERROR_RT_CONTEXT_NULL,
                       f"{what}: this thread has no current context (call aclrtSetDevice or "
                       "aclrtSetCurrentContext in the thread first)")
    return d


def check_device(device_id: int, what: str) -> int:
    if not STATE.initialised:
        raise SimError(lib.ACL_ERROR_UNINITIALIZE, f"{what}: aclInit has not been called")
    if not 0 <= device_id < DEVICE_COUNT:
        raise SimError(lib.ACL_ERROR_RT_INVALID_DEVICEID, f"{what}: no device {device_id}")
    return device_id


def tolerate(rule: str, message: str) -> None:
    """A documented rule broken: refused, unless CANN_SIM_ALLOW lets the client off."""
    if rule not in STATE.allowed:
        raise SimError(lib.ACLNN_ERR_PARAM_INVALID, message)
    STATE.tolerated = STATE.tolerated[-15:] + [rule]   # the call trace's (trace.py)
    if LOG_REFUSALS:
        print(f"CANN-SIM tolerated [{rule}]: {message}", file=sys.stderr, flush=True)


def warn(message: str) -> None:
    """An operator's warning: op_api's OP_LOGW, or a page's caveat that the source does not
    enforce (the call is taken). Kept for the call trace, printed once per message where
    refusals are."""
    STATE.warnings = STATE.warnings[-15:] + [message]   # the call trace's (trace.py)
    if message not in STATE.warned:
        STATE.warned.add(message)
        if LOG_REFUSALS:
            print(f"CANN-SIM warning: {message}", file=sys.stderr, flush=True)


def refused(message: str) -> None:
    STATE.last_error = message
    if LOG_REFUSALS:
        print(f"CANN-SIM refused: {message}", file=sys.stderr, flush=True)


def report_leaks(when: str) -> list[str]:
    """What is still allocated, created or never launched (each object named once):
    printed on stderr and kept in STATE.leaks."""
    found = []

    def fresh(objs):
        new = [o for o in objs if id(o) not in STATE.reported]
        STATE.reported.update(id(o) for o in new)
        return new
    for mem, what in ((STATE.memory, "device allocation(s)"), (STATE.host, "aclrtMallocHost block(s)")):
        live = fresh(mem.live())
        if live:
            found.append(f"{len(live)} {what}, {sum(a.size for a in live)} bytes, never freed")
    live = fresh(STATE.memory.reservations.values())
    if live:
        found.append(f"{len(live)} aclrtReserveMemAddress range(s), {sum(r.size for r in live)} "
                     "bytes, never released")
    live = fresh(STATE.physical.objects.values())
    if live:
        found.append(f"{len(live)} aclrtMallocPhysical handle(s), {sum(p.size for p in live)} "
                     "bytes, never freed")
    for kind in ("streams", "events", "tensors", "scalars", "int_arrays", "tensor_lists", "models"):
        handles = getattr(STATE, kind)
        n = len(fresh(handles.objects.values()))
        if n:
            found.append(f"{n} {handles.kind}(s) never destroyed")
    # an executor made by GetWorkspaceSize is released by its launch (aclnnXxx) or, once
    # made repeatable, by aclDestroyAclOpExecutor: one that got neither is lost
    n = len(fresh(STATE.executors.objects.values()))
    if n:
        found.append(f"{n} aclOpExecutor(s) neither launched nor destroyed")
    if found:
        STATE.leaks += found
        print(f"CANN-SIM: leak at {when}: " + "; ".join(found), file=sys.stderr)
    return found
