"""The simulated ACL runtime: device memory (aclrtMalloc and the virtual memory API),
streams, events, stream capture into model run instances, and the aclTensor / aclScalar /
aclIntArray descriptors of aclnn/acl_meta.h.

Device memory is real host memory (NumPy buffers, or a memfd mapped into reserved host
address space for aclrtMapMem), so the native layer's pointer arithmetic works; it is
tracked by address. Handles (streams, events, descriptors, executors, physical memory,
models) are opaque addresses that are never reused, so a destroyed handle is recognised
as such.
"""
from __future__ import annotations

import bisect
import collections
import itertools
import math
import mmap
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .binding import ffi, lib

from . import dtypes

# The simulated SoC, whose aclnn rules the simulator follows: CANN_SIM_SOC picks it (read
# at aclInit), by the name aclrtGetSocName reports; operators ask soc_family().
SOCS = {"Ascend910B1": "910B", "Ascend910B2": "910B", "Ascend910B3": "910B",
        "Ascend910B4": "910B", "Ascend310P1": "310P", "Ascend310P3": "310P"}
DEFAULT_SOC = "Ascend910B3"
DEVICE_COUNT = 1
DEVICE_MEMORY = 8 << 30           # bytes of simulated device memory
HOST_PINNED = 4 << 30             # bytes of aclrtMallocHost memory
# aclrtMalloc returns 64-byte aligned addresses (its doc), and here never more than
# that: every address is an odd multiple of 64, so code that assumes more fails.
# CANN_SIM_MALLOC_ALIGN (read at aclInit; a power of two >= 64) raises the guarantee for a
# client that relies on more than the doc promises: ggml-cann's buffer type declares 128
# (docs/ggml-cann-on-cann-sim.md records it), and everything behind that would go untested.
ALIGN = 64
ASYNC_COPY_ALIGN = 64             # aclrtMemcpyAsync: src and dst 64-byte aligned (its doc)
FRESH, POISON = 0xA5, 0xFF        # bytes of new and of freed memory
# a byte's two INT4 elements (low nibble first), sign-extended: one table look-up per byte
INT4_PAIRS = ((np.arange(256)[:, None] >> np.array([0, 4])) & 0xF).astype(np.int8)
INT4_PAIRS[INT4_PAIRS >= 8] -= 16
QUARANTINE_BYTES = 256 << 20      # freed memory kept poisoned before it really goes
HUGE_PAGE, HUGE_1G = 2 << 20, 1 << 30   # granularities of ACL_HBM_MEM_HUGE / _HUGE1G (aclrtMallocPhysical's doc)


class SimError(Exception):
    """An entry point refuses: `code` is returned, the message is aclGetRecentErrMsg."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = int(code)


# ------------------------------------------------------------------ memory ----

@dataclass(eq=False)
class Allocation:
    addr: int
    size: int
    buf: np.ndarray          # uint8, exactly [addr, addr + size)
    live: bool = True


class DeviceMemory:
    """Allocations by address: device memory (aclrtMalloc), or pinned host memory
    (aclrtMallocHost) which only async copies care about."""

    def __init__(self, capacity: int, malloc: str = "aclrtMalloc", free: str = "aclrtFree"):
        self.capacity = capacity
        self.align = ALIGN
        self.malloc_name, self.free_name = malloc, free
        self.used = 0
        self.starts: list[int] = []            # sorted addresses of known allocations
        self.by_addr: dict[int, Allocation] = {}
        self.quarantine: collections.deque[Allocation] = collections.deque()
        self.quarantined = 0
        # aclrtReserveMemAddress ranges by address (live ones only)
        self.res_starts: list[int] = []
        self.reservations: dict[int, Reservation] = {}

    def malloc(self, size: int) -> int:
        if size == 0:
            raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{self.malloc_name}: size is 0")
        if self.used + size > self.capacity:
            raise SimError(lib.ACL_ERROR_RT_MEMORY_ALLOCATION,
                           f"{self.malloc_name}: out of memory ({size} bytes asked, "
                           f"{self.capacity - self.used} free)")
        align = self.align
        raw = np.empty(size + 2 * align, np.uint8)
        base = raw.__array_interface__["data"][0]   # the buffer's address
        skip = -base % align
        skip += align if (base + skip) % (2 * align) == 0 else 0   # aligned, never twice that
        a = Allocation(base + skip, size, raw[skip:skip + size])
        a.buf[:] = FRESH          # uninitialised memory is not zero on a device
        self.used += size
        bisect.insort(self.starts, a.addr)
        self.by_addr[a.addr] = a
        return a.addr

    def free(self, addr: int) -> None:
        a = self.by_addr.get(addr)
        if a is None:
            raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{self.free_name}: {addr:#x} is not an allocation")
        if not a.live:
            raise SimError(lib.ACL_ERROR_RT_MEMORY_FREE, f"{self.free_name}: {addr:#x} freed twice")
        a.live = False
        a.buf[:] = POISON
        self.used -= a.size
        self.quarantine.append(a)
        self.quarantined += a.size
        while self.quarantined > QUARANTINE_BYTES:
            old = self.quarantine.popleft()
            self.quarantined -= old.size
            del self.by_addr[old.addr]
            self.starts.remove(old.addr)

    def find(self, addr: int, size: int) -> Allocation | None:
        """The known allocation holding [addr, addr + size), live or freed, or a live
        one standing for a range of reserved virtual memory that is mapped throughout."""
        i = bisect.bisect_right(self.starts, addr) - 1
        if i >= 0:
            a = self.by_addr[self.starts[i]]
            if addr + size <= a.addr + a.size:
                return a
        if self.reservations:
            r = self.reservation_at(addr)
            if r is not None and r.mapped(addr, size):
                return Allocation(addr, size, host_bytes(addr, size))
        return None

    def reservation_at(self, addr: int) -> Reservation | None:
        i = bisect.bisect_right(self.res_starts, addr) - 1
        if i < 0:
            return None
        r = self.reservations[self.res_starts[i]]
        return r if addr < r.addr + r.size else None

    def bytes(self, addr: int, size: int, what: str, write: bool = False) -> np.ndarray:
        """A uint8 view of device memory; reading freed memory gives its poison."""
        a = self.find(addr, size)
        if a is None:
            if self.reservation_at(addr) is not None:
                raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                               f"{what}: [{addr:#x}, +{size}) is reserved virtual memory that "
                               "is not mapped (aclrtMapMem) throughout")
            raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                           f"{what}: [{addr:#x}, +{size}) is not inside one device allocation")
        if write and not a.live:
            raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                           f"{what}: write to freed device memory at {addr:#x}")
        return a.buf[addr - a.addr: addr - a.addr + size]

    def live(self) -> list[Allocation]:
        return [a for a in self.by_addr.values() if a.live]


def host_bytes(addr: int, size: int) -> np.ndarray:
    return np.frombuffer(ffi.buffer(ffi.cast("char *", addr), size), np.uint8)


# ----------------------------------------------------------- virtual memory ----
# aclrtReserveMemAddress reserves host address space (PROT_NONE, never given back, so an
# address is never reused); aclrtMallocPhysical's memory is a memfd, which aclrtMapMem
# maps there (MAP_FIXED | MAP_SHARED): mapped ranges of one reservation are contiguous
# host memory, as they are contiguous device addresses on the NPU, and aclrtUnmapMem
# puts PROT_NONE back, so a host access to unmapped memory faults as it would.

_PROT_NONE, _MAP_FIXED, _MAP_NORESERVE = 0, 0x10, 0x4000   # Linux values the mmap module lacks
_libc = None     # mmap(2) through cffi's ABI mode: the mmap module cannot map at an address


def _mmap(addr: int | None, size: int, prot: int, flags: int, fd: int = -1) -> int:
    global _libc
    if _libc is None:
        import cffi
        abi = cffi.FFI()
        abi.cdef("void *mmap(void *addr, size_t length, int prot, int flags, int fd, long offset);")
        _libc = abi, abi.dlopen(None)
    abi, libc = _libc
    p = int(abi.cast("uintptr_t", libc.mmap(abi.cast("void *", addr or 0), size, prot, flags, fd, 0)))
    if p == int(abi.cast("uintptr_t", -1)):        # MAP_FAILED
        raise SimError(lib.ACL_ERROR_RT_MEMORY_ALLOCATION,
                       f"host mmap of {size} bytes failed: {os.strerror(abi.errno)}")
    return p


def _no_access(addr: int, size: int) -> int:
    return _mmap(addr, size, _PROT_NONE,
                 mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | _MAP_NORESERVE | (_MAP_FIXED if addr else 0))


@dataclass(eq=False)
class Physical:
    """aclrtMallocPhysical's memory: a memfd of `size` bytes, counted on `device`."""
    size: int
    device: int
    granularity: int
    fd: int
    mappings: int = 0
    freed: bool = False      # aclrtFreePhysical came while mapped: it goes at the last unmap


@dataclass(eq=False)
class Reservation:
    addr: int
    size: int
    maps: dict = field(default_factory=dict)     # mapped address -> (size, Physical)

    def mapped(self, addr: int, size: int) -> bool:
        """Whether [addr, addr + size) is mapped throughout."""
        pos, end = addr, addr + size
        if end > self.addr + self.size:
            return False
        for start in sorted(self.maps):
            n = self.maps[start][0]
            if start > pos:
                return False
            pos = max(pos, start + n)
            if pos >= end:
                return True
        return pos >= end


# ------------------------------------------------------------- descriptors ----

class _cached:
    """functools.cached_property without its lock (Python 3.11 takes an RLock on every
    first access: a tenth of a small case's aclnn call): computed once, then read from
    the instance's __dict__."""

    def __init__(self, fn):
        self.fn, self.name = fn, fn.__name__

    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = obj.__dict__[self.name] = self.fn(obj)
        return value


@dataclass(eq=False)
class TensorDesc:
    """An aclTensor: view dims / strides (elements, outermost first), storage offset,
    format, storage shape and device address, captured at aclCreateTensor."""
    dims: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    dtype: int
    format: int
    storage: tuple[int, ...]
    addr: int

    @_cached   # the dtype never changes
    def np_dtype(self) -> np.dtype:
        return dtypes.numpy_dtype(self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.dims)

    @_cached   # storage and dtype never change (TransMatmulWeight refreshes it)
    def storage_bytes(self) -> int:
        n = math.prod(self.storage)   # math.prod: np.prod costs microseconds a call
        per_byte = dtypes.PACKED.get(self.dtype)
        return -(-n // per_byte) if per_byte else n * self.np_dtype.itemsize

    def is_contiguous(self) -> bool:
        expect = 1
        for d, s in zip(reversed(self.dims), reversed(self.strides)):
            if d != 1 and s != expect:
                return False
            expect *= d
        return True

    def array(self, write: bool = False) -> np.ndarray:
        """The view onto device memory, as the hardware would address it."""
        if not self.storage_bytes:
            return np.empty(self.dims, self.np_dtype)
        mem = STATE.memory.bytes(self.addr, self.storage_bytes, "tensor storage", write)
        if self.dtype in dtypes.PACKED:
            return self._unpacked(mem, write)
        item = self.np_dtype.itemsize
        return np.ndarray(self.dims, self.np_dtype, mem, self.offset * item,
                          tuple(s * item for s in self.strides))

    def _unpacked(self, mem: np.ndarray, write: bool) -> np.ndarray:
        """INT4: the storage's nibbles as sign-extended int8 elements (a read-only copy)."""
        if write:
            raise SimError(lib.ACLNN_ERR_PARAM_INVALID, "writing INT4 tensors is not simulated")
        elems = np.take(INT4_PAIRS, np.frombuffer(mem, np.uint8), axis=0).reshape(-1)   # low nibble first
        return np.lib.stride_tricks.as_strided(elems[self.offset:], self.dims, self.strides,
                                               writeable=False)

    def describe(self) -> str:
        return f"{dtypes.name(self.dtype)}{list(self.dims)}"


@dataclass(eq=False)
class ScalarDesc:
    value: object      # a Python number
    dtype: int


@dataclass(eq=False)
class Capture:
    """A stream between aclmdlRICaptureBegin and aclmdlRICaptureEnd: its work is
    recorded in `tasks`; `invalid` says why the capture failed (its end refuses)."""
    mode: int
    thread: int
    tasks: list[Callable[[], None]] = field(default_factory=list)
    invalid: str = ""
    active: bool = True


@dataclass(eq=False)
class Stream:
    device: int = 0
    # a deque: a graph queues thousands of launches before its one synchronisation
    queue: collections.deque[Callable[[], None]] = field(default_factory=collections.deque)
    capture: Capture | None = None


@dataclass(eq=False)
class Event:
    flags: int | None = None            # None: aclrtCreateEvent's (sync and timing)
    mark: Mark | None = None            # the task its latest aclrtRecordEvent queued
    capture: Capture | None = None      # the capture that recorded it, if any
    time: float | None = None


class Mark:
    """The task aclrtRecordEvent queues: its event is complete once it has run."""

    def __init__(self, event: Event):
        self.event = event

    def __call__(self):
        if self.event.mark is self:     # a later record replaced it: it no longer counts
            self.event.time = time.perf_counter()


@dataclass(eq=False)
class Model:
    """An aclmdlRI made by capture: the recorded tasks, replayed by aclmdlRIExecuteAsync."""
    tasks: list[Callable[[], None]]
    device: int


class ModelEnd:
    """Queued after a model's tasks: while one is queued the model is running."""

    def __init__(self, model: Model):
        self.model = model

    def __call__(self):
        pass


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

    def get(self, ptr, what: str, code: int = None):
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
        self.default_streams: dict[int, Stream] = {}   # device -> its default (NULL) stream
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
        self.last_error = ""
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
    return SOCS[STATE.soc or _soc_from_env()]


def _align_from_env() -> int:
    text = os.environ.get("CANN_SIM_MALLOC_ALIGN", "") or str(ALIGN)
    if not text.isdigit() or int(text) < ALIGN or int(text) & (int(text) - 1):
        raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                       f"CANN_SIM_MALLOC_ALIGN={text!r} is not a power of two >= {ALIGN}")
    return int(text)


def _soc_from_env() -> str:
    name = os.environ.get("CANN_SIM_SOC", "") or DEFAULT_SOC
    if name not in SOCS:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                       f"CANN_SIM_SOC={name!r} is not a simulated SoC (one of {', '.join(SOCS)})")
    return name


def _seed_from_env() -> int:
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


def get_stream(ptr, what: str, code: int | None = None) -> Stream:
    """A live stream; NULL is the default stream of the calling thread's device (acl_rt.h:
    where an aclrtStream is taken, NULL stands for the default stream)."""
    if ptr == ffi.NULL:
        d = need_device(what)
        if d not in STATE.default_streams:
            STATE.default_streams[d] = Stream(device=d)
        return STATE.default_streams[d]
    return STATE.streams.get(ptr, what, code)


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


# ----------------------------------------------------------- entry points ----

RUNTIME: dict[str, Callable] = {}


def entry(fn):
    RUNTIME[fn.__name__] = fn
    return fn


@entry
def aclInit(config_path):
    if STATE.initialised or STATE.finalised:
        raise SimError(lib.ACL_ERROR_REPEAT_INITIALIZE, "aclInit: only once per process")
    try:
        STATE.soc = _soc_from_env()
        STATE.memory.align = _align_from_env()
        STATE.allowed = _allowed_from_env()
        STATE.seed = _seed_from_env()
    except SimError as e:
        raise SimError(e.code, f"aclInit: {e}") from None
    STATE.initialised = True
    return 0


@entry
def aclFinalize():
    if not STATE.initialised:
        raise SimError(lib.ACL_ERROR_REPEAT_FINALIZE if STATE.finalised else lib.ACL_ERROR_UNINITIALIZE,
                       "aclFinalize: ACL is not initialised")
    report_leaks("aclFinalize")
    STATE.initialised, STATE.finalised = False, True
    return 0


@entry
def aclGetRecentErrMsg():
    return STATE.c_string(STATE.last_error)


@entry
def aclrtGetDeviceCount(count):
    if not STATE.initialised:
        raise SimError(lib.ACL_ERROR_UNINITIALIZE, "aclrtGetDeviceCount: aclInit has not been called")
    count[0] = DEVICE_COUNT
    return 0


def _device(device_id: int, what: str) -> int:
    if not STATE.initialised:
        raise SimError(lib.ACL_ERROR_UNINITIALIZE, f"{what}: aclInit has not been called")
    if not 0 <= device_id < DEVICE_COUNT:
        raise SimError(lib.ACL_ERROR_RT_INVALID_DEVICEID, f"{what}: no device {device_id}")
    return device_id


@entry
def aclrtSetDevice(device_id):
    d = _device(device_id, "aclrtSetDevice")
    STATE.device_refs[d] += 1
    if d not in STATE.device_context:
        STATE.device_context[d] = STATE.contexts.new(d)
    STATE.current[threading.get_ident()] = STATE.device_context[d]
    return 0


@entry
def aclrtResetDevice(device_id):
    d = _device(device_id, "aclrtResetDevice")
    if STATE.device_refs[d] == 0:
        raise SimError(lib.ACL_ERROR_RT_CONTEXT_NULL, f"aclrtResetDevice: device {d} is not set")
    STATE.device_refs[d] -= 1
    if STATE.device_refs[d] == 0:   # the last reference: the device closes, its context goes
        report_leaks(f"aclrtResetDevice({d})")
        STATE.default_streams.pop(d, None)
        del STATE.contexts.objects[STATE.device_context.pop(d)]
    return 0


@entry
def aclrtGetDevice(device_id):
    """The device of the calling thread's current context; none is an error (its doc)."""
    d = need_device("aclrtGetDevice")
    if device_id == ffi.NULL:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, "aclrtGetDevice: deviceId is nullptr")
    device_id[0] = d
    return 0


def _peer_pair(device: int, peer: int, what: str) -> None:
    """aclrtDeviceCanAccessPeer / aclrtDeviceEnablePeerAccess: ids in [0, count - 1],
    and a device is never its own peer (their docs: "不能与...相同")."""
    for d in (device, peer):
        _device(d, what)
    if device == peer:
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"{what}: device {device} and its peer must differ")


@entry
def aclrtDeviceCanAccessPeer(can_access, device_id, peer_device_id):
    if can_access == ffi.NULL:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, "aclrtDeviceCanAccessPeer: canAccessPeer is nullptr")
    _peer_pair(device_id, peer_device_id, "aclrtDeviceCanAccessPeer")
    can_access[0] = 1     # simulated devices of one process share the host's memory
    return 0


@entry
def aclrtDeviceEnablePeerAccess(peer_device_id, flags):
    d = need_device("aclrtDeviceEnablePeerAccess")
    if flags != 0:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                       f"aclrtDeviceEnablePeerAccess: flags {flags} (reserved, must be 0)")
    _peer_pair(d, peer_device_id, "aclrtDeviceEnablePeerAccess")
    STATE.peer_access.add((d, peer_device_id))   # one way (its doc); enabling again is fine
    return 0


@entry
def aclrtGetCurrentContext(context):
    need_device("aclrtGetCurrentContext")
    context[0] = ffi.cast("void *", STATE.current[threading.get_ident()])
    return 0


@entry
def aclrtSetCurrentContext(context):
    STATE.contexts.get(context, "aclrtSetCurrentContext", lib.ACL_ERROR_INVALID_PARAM)
    STATE.current[threading.get_ident()] = int(ffi.cast("uintptr_t", context))
    return 0


@entry
def aclrtGetSocName():
    return STATE.c_string(STATE.soc) if STATE.initialised else ffi.NULL


@entry
def aclrtGetMemInfo(attr, free, total):
    need_device("aclrtGetMemInfo")
    total[0] = STATE.memory.capacity
    free[0] = STATE.memory.capacity - STATE.memory.used
    return 0


@entry
def aclrtCreateStream(stream):
    d = need_device("aclrtCreateStream")
    stream[0] = ffi.cast("void *", STATE.streams.new(Stream(d)))
    return 0


@entry
def aclrtDestroyStream(stream):
    s = STATE.streams.get(stream, "aclrtDestroyStream")
    if s.capture is not None:
        raise SimError(lib.ACL_ERROR_RT_STREAM_CAPTURED,
                       "aclrtDestroyStream: the stream is capturing (aclmdlRICaptureEnd first)")
    STATE.streams.pop(stream, "aclrtDestroyStream")
    if s.queue:   # destroying a stream does not run its work: the caller forgot a sync
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"aclrtDestroyStream: {len(s.queue)} task(s) queued and never synchronised")
    return 0


def enqueue(s: Stream, task: Callable[[], None]) -> None:
    """Queue work on a stream, or record it in the stream's capture."""
    (s.capture.tasks if s.capture is not None else s.queue).append(task)


def run_stream(s: Stream, until: Callable | None = None) -> None:
    """Execute the queued work in order (up to and including the task `until`); the
    first failure empties the stream."""
    while s.queue:
        task = s.queue.popleft()
        try:
            task()
        except Exception as e:
            s.queue.clear()
            if isinstance(e, SimError) and e.code == lib.ACL_ERROR_RT_AICORE_EXCEPTION:
                raise      # a failure of the stream this one waited for
            raise SimError(lib.ACL_ERROR_RT_AICORE_EXCEPTION, f"task failed on the stream: {e}") from e
        if task is until:
            return


def _queued_on(task) -> Stream | None:
    """The stream whose queue holds `task` (a Mark; a model replays the same ones)."""
    for s in STATE.streams.objects.values():
        if any(t is task for t in s.queue):
            return s
    return None


def _refuse_in_capture(capture: Capture, code: int, message: str):
    """Capture rules (hicann/runtime dev_guide 04-01, single-stream capture): querying or
    synchronising a capturing stream, its events, its device or context is illegal in
    every mode, and an unsafe call "fails the capture": the capture is invalidated, so
    aclmdlRICaptureEnd refuses it (ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED)."""
    capture.invalid = capture.invalid or message
    return SimError(code, message)


@entry
def aclrtSynchronizeStream(stream):
    s = get_stream(stream, "aclrtSynchronizeStream", lib.ACL_ERROR_INVALID_PARAM)
    if s.capture is not None:
        raise _refuse_in_capture(s.capture, lib.ACL_ERROR_RT_STREAM_CAPTURED,
                                 "aclrtSynchronizeStream: the stream is capturing")
    run_stream(s)
    return 0


@entry
def aclrtSynchronizeDevice():
    """Run every stream of the calling thread's device (the first failure is returned,
    after the other streams ran)."""
    d = need_device("aclrtSynchronizeDevice")
    streams = [s for s in STATE.streams.objects.values() if s.device == d]
    streams += [s for s in STATE.default_streams.values() if s.device == d]
    capturing = [s for s in streams if s.capture is not None]
    if capturing:
        for s in capturing:
            _refuse_in_capture(s.capture, 0, "aclrtSynchronizeDevice during the capture")
        raise SimError(lib.ACL_ERROR_RT_STREAM_CAPTURED,
                       f"aclrtSynchronizeDevice: {len(capturing)} stream(s) of device {d} capturing")
    first = None
    for s in streams:
        try:
            run_stream(s)
        except SimError as e:
            first = first or e
    if first is not None:
        raise first
    return 0


@entry
def aclrtMalloc(dev_ptr, size, policy):
    need_device("aclrtMalloc")
    dev_ptr[0] = ffi.cast("void *", STATE.memory.malloc(int(size)))
    return 0


@entry
def aclrtFree(dev_ptr):
    STATE.memory.free(int(ffi.cast("uintptr_t", dev_ptr)))
    return 0


@entry
def aclrtMallocHost(host_ptr, size):
    need_device("aclrtMallocHost")
    host_ptr[0] = ffi.cast("void *", STATE.host.malloc(int(size)))
    return 0


@entry
def aclrtFreeHost(host_ptr):
    STATE.host.free(int(ffi.cast("uintptr_t", host_ptr)))
    return 0


def _copy_plan(dst, dest_max, src, count, kind, what, asynchronous=False):
    """Check a copy now (as the runtime does at the call) and return the copy itself."""
    need_device(what)
    count, dest_max = int(count), int(dest_max)
    if count > dest_max:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: count {count} > destMax {dest_max}")
    d, s = int(ffi.cast("uintptr_t", dst)), int(ffi.cast("uintptr_t", src))
    dev_dst = kind in (lib.ACL_MEMCPY_HOST_TO_DEVICE, lib.ACL_MEMCPY_DEVICE_TO_DEVICE)
    dev_src = kind in (lib.ACL_MEMCPY_DEVICE_TO_HOST, lib.ACL_MEMCPY_DEVICE_TO_DEVICE)
    if kind not in (lib.ACL_MEMCPY_HOST_TO_HOST, lib.ACL_MEMCPY_HOST_TO_DEVICE,
                    lib.ACL_MEMCPY_DEVICE_TO_HOST, lib.ACL_MEMCPY_DEVICE_TO_DEVICE):
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: memcpy kind {kind} not simulated")
    pageable = asynchronous and _check_async_copy(d, s, count, kind, dev_dst, dev_src, what)
    for addr, on_dev, role in ((d, dev_dst, "dst"), (s, dev_src, "src")):
        if on_dev:
            STATE.memory.bytes(addr, count, f"{what} {role}", write=role == "dst")
        elif STATE.memory.find(addr, 1) is not None:
            raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                           f"{what}: {role} {addr:#x} is device memory but the kind says host")

    def copy():
        target = STATE.memory.bytes(d, count, what, write=True) if dev_dst else host_bytes(d, count)
        source = STATE.memory.bytes(s, count, what) if dev_src else host_bytes(s, count)
        target[:] = source
    copy.pageable = pageable
    return copy


def _check_async_copy(d, s, count, kind, dev_dst, dev_src, what) -> bool:
    """aclrtMemcpyAsync's documented limits: no host-to-host copy
    (ACL_ERROR_RT_FEATURE_NOT_SUPPORT) and both addresses the copy engine reads or writes,
    device or pinned host memory, 64-byte aligned (the docs give no code:
    ACL_ERROR_RT_ADDR_UNALIGNED). True when the host side is pageable memory (not
    from aclrtMallocHost): the current page (hicann/runtime api_docs/aclrtMemcpyAsync.md)
    takes it and then returns only once the copy is done, where an older one said such a
    copy "fails unpredictably"; the simulator follows the current page, which ggml-cann
    relies on (its ROPE cache upload)."""
    if kind == lib.ACL_MEMCPY_HOST_TO_HOST:
        raise SimError(lib.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                       f"{what}: ACL_MEMCPY_HOST_TO_HOST is not supported asynchronously")
    pageable = False
    for addr, on_dev, role in ((d, dev_dst, "dst"), (s, dev_src, "src")):
        pinned = None if on_dev else STATE.host.find(addr, count)
        if not on_dev and (pinned is None or not pinned.live):
            pageable = True     # staged by the runtime, not read by the copy engine itself
        elif addr % ASYNC_COPY_ALIGN:
            message = (f"{what}: {role} {addr:#x} is not {ASYNC_COPY_ALIGN}-byte aligned "
                       f"(offset {addr % ASYNC_COPY_ALIGN})")
            if "async-copy-align" not in STATE.allowed:
                raise SimError(lib.ACL_ERROR_RT_ADDR_UNALIGNED, message)
            tolerate("async-copy-align", message)
    return pageable


def _unsafe_call(what: str) -> None:
    """aclrtMemcpy / aclrtMemset (the docs' "non-safe functions") during a capture in
    ACL_MODEL_RI_CAPTURE_MODE_GLOBAL (from any thread) or THREAD_LOCAL (from the
    capturing thread): ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT, and the capture fails."""
    me = threading.get_ident()
    hit = [s.capture for s in STATE.streams.objects.values() if s.capture is not None and (
        s.capture.mode == lib.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL
        or (s.capture.mode == lib.ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL and s.capture.thread == me))]
    for c in hit:
        _refuse_in_capture(c, 0, f"{what} during the capture")
    if hit:
        raise SimError(lib.ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT,
                       f"{what}: not allowed while a stream captures in mode "
                       f"{'GLOBAL' if hit[0].mode == lib.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL else 'THREAD_LOCAL'}")


@entry
def aclrtMemcpy(dst, dest_max, src, count, kind):
    _unsafe_call("aclrtMemcpy")
    if count:
        # synchronous, but not ordered after stream work: results need a stream sync
        _copy_plan(dst, dest_max, src, count, kind, "aclrtMemcpy")()
    return 0


@entry
def aclrtMemcpyAsync(dst, dest_max, src, count, kind, stream):
    s = get_stream(stream, "aclrtMemcpyAsync", lib.ACL_ERROR_INVALID_PARAM)
    if count:
        copy = _copy_plan(dst, dest_max, src, count, kind, "aclrtMemcpyAsync", True)
        if copy.pageable and s.capture is not None:
            raise _refuse_in_capture(s.capture, lib.ACL_ERROR_RT_STREAM_CAPTURED,
                                     "aclrtMemcpyAsync: pageable host memory is copied before the "
                                     "call returns, which a capturing stream cannot do")
        enqueue(s, copy)
        if copy.pageable:       # the call returns once the copy (and what precedes it) ran
            run_stream(s, until=copy)
    return 0


@entry
def aclrtMemset(dev_ptr, max_count, value, count):
    need_device("aclrtMemset")
    _unsafe_call("aclrtMemset")
    if int(count) > int(max_count):
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"aclrtMemset: count {count} > maxCount {max_count}")
    if count:
        STATE.memory.bytes(int(ffi.cast("uintptr_t", dev_ptr)), int(count), "aclrtMemset",
                           write=True)[:] = value & 0xFF
    return 0


@entry
def aclrtCreateEvent(event):
    need_device("aclrtCreateEvent")
    event[0] = ffi.cast("void *", STATE.events.new(Event()))
    return 0


EVENT_FLAGS = 0x1 | 0x2 | 0x8 | 0x10 | 0x20    # ACL_EVENT_SYNC ... ACL_EVENT_EXTERNAL


@entry
def aclrtCreateEventWithFlag(event, flag):
    """Flags as aclrtCreateEventWithFlag's doc lists them, OR-ed; ACL_EVENT_EXTERNAL
    (capture task update) goes alone, and is not simulated."""
    need_device("aclrtCreateEventWithFlag")
    if event == ffi.NULL:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, "aclrtCreateEventWithFlag: event is nullptr")
    flag = int(flag)
    if flag & ~EVENT_FLAGS:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                       f"aclrtCreateEventWithFlag: unknown flag bits {flag & ~EVENT_FLAGS:#x}")
    if flag & lib.ACL_EVENT_EXTERNAL:
        if flag != lib.ACL_EVENT_EXTERNAL:
            raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                           "aclrtCreateEventWithFlag: ACL_EVENT_EXTERNAL takes no other flag")
        raise SimError(lib.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                       "aclrtCreateEventWithFlag: ACL_EVENT_EXTERNAL (capture task update) is not simulated")
    event[0] = ffi.cast("void *", STATE.events.new(Event(flag)))
    return 0


@entry
def aclrtDestroyEvent(event):
    STATE.events.pop(event, "aclrtDestroyEvent")
    return 0


@entry
def aclrtRecordEvent(event, stream):
    e = STATE.events.get(event, "aclrtRecordEvent", lib.ACL_ERROR_INVALID_PARAM)
    s = get_stream(stream, "aclrtRecordEvent", lib.ACL_ERROR_INVALID_PARAM)
    e.mark, e.capture, e.time = Mark(e), s.capture, None
    enqueue(s, e.mark)
    return 0


def _captured(e: Event) -> bool:
    return e.capture is not None and e.capture.active


@entry
def aclrtSynchronizeEvent(event):
    """Run the work queued before the event's record (on whichever stream holds it)."""
    e = STATE.events.get(event, "aclrtSynchronizeEvent", lib.ACL_ERROR_INVALID_PARAM)
    if _captured(e):
        raise _refuse_in_capture(e.capture, lib.ACL_ERROR_RT_EVENT_CAPTURED,
                                 "aclrtSynchronizeEvent: the event was recorded in a capture")
    s = _queued_on(e.mark) if e.mark is not None else None
    if s is not None:
        run_stream(s, until=e.mark)
    return 0


@entry
def aclrtStreamWaitEvent(stream, event):
    """The stream's later work runs after the work queued before the event's latest
    record (not a later one: its doc). In the simulator's model, where work runs at
    synchronisation, the wait is a task that first runs the recording stream up to the
    record. An event from aclrtCreateEventWithFlag without ACL_EVENT_SYNC cannot be
    waited for (its doc). A wait that would join a second stream to a capture
    (cross-stream capture) is not simulated."""
    what = "aclrtStreamWaitEvent"
    s = get_stream(stream, what, lib.ACL_ERROR_INVALID_PARAM)
    e = STATE.events.get(event, what, lib.ACL_ERROR_INVALID_PARAM)
    if e.flags is not None and not e.flags & lib.ACL_EVENT_SYNC:
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"{what}: the event was created without ACL_EVENT_SYNC (flags {e.flags:#x})")
    mark = e.mark
    if mark is None:            # never recorded: nothing to wait for
        return 0
    if s.capture is not None or _captured(e):
        if s.capture is not None and e.capture is s.capture:
            return 0            # recorded earlier in this same capture: already in order
        raise SimError(lib.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                       f"{what}: cross-stream capture (an event wait linking a capturing "
                       "stream with another stream) is not simulated")

    def wait():
        src = _queued_on(mark)
        if src is not None and src is not s:
            run_stream(src, until=mark)
    enqueue(s, wait)
    return 0


@entry
def aclrtEventElapsedTime(ms, start, end):
    a = STATE.events.get(start, "aclrtEventElapsedTime", lib.ACL_ERROR_INVALID_PARAM)
    b = STATE.events.get(end, "aclrtEventElapsedTime", lib.ACL_ERROR_INVALID_PARAM)
    for ev in (a, b):    # aclrtCreateEventWithFlag's doc: only ACL_EVENT_TIME_LINE records time
        if ev.flags is not None and not ev.flags & lib.ACL_EVENT_TIME_LINE:
            raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                           "aclrtEventElapsedTime: an event was created without "
                           f"ACL_EVENT_TIME_LINE (flags {ev.flags:#x}): it records no time")
    if a.time is None or b.time is None:
        raise SimError(lib.ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                       "aclrtEventElapsedTime: an event has not completed (synchronise it first)")
    ms[0] = (b.time - a.time) * 1e3
    return 0


# virtual memory (hicann/runtime api_ref 11-04). The docs give no code per refusal:
# a null pointer or a reserved argument that is not 0 is ACL_ERROR_INVALID_PARAM (the
# ACL layer's check), a rule broken against the runtime's state ACL_ERROR_RT_PARAM_INVALID,
# a dead handle ACL_ERROR_RT_INVALID_HANDLE, no memory ACL_ERROR_RT_MEMORY_ALLOCATION.

def _granularity(prop, what: str) -> int:
    """Check an aclrtPhysicalMemProp as aclrtMallocPhysical's doc allows it for device
    memory; its granularity: 2 MiB for the huge-page types (ACL_HBM_MEM_NORMAL is
    allocated as ACL_HBM_MEM_HUGE), 1 GiB for ACL_HBM_MEM_HUGE1G (A2 / A3 only)."""
    if prop == ffi.NULL:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: prop is nullptr")
    if prop.handleType not in (lib.ACL_MEM_HANDLE_TYPE_NONE, lib.ACL_MEM_HANDLE_TYPE_POSIX):
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: handleType {prop.handleType}")
    if prop.allocationType != lib.ACL_MEM_ALLOCATION_TYPE_PINNED:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: allocationType {prop.allocationType}")
    if prop.location.type != lib.ACL_MEM_LOCATION_TYPE_DEVICE:
        raise SimError(lib.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                       f"{what}: location.type {prop.location.type}: only device memory "
                       "(ACL_MEM_LOCATION_TYPE_DEVICE) is simulated")
    _device(prop.location.id, what)
    attr = prop.memAttr
    if attr in (lib.ACL_HBM_MEM_HUGE, lib.ACL_HBM_MEM_NORMAL):
        return HUGE_PAGE
    if attr == lib.ACL_HBM_MEM_HUGE1G:
        if soc_family() != "910B":
            raise SimError(lib.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                           f"{what}: ACL_HBM_MEM_HUGE1G is not supported on {STATE.soc}")
        return HUGE_1G
    raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                   f"{what}: memAttr {attr} is not a device memory type the simulator takes "
                   "(ACL_HBM_MEM_HUGE, ACL_HBM_MEM_NORMAL, ACL_HBM_MEM_HUGE1G)")


@entry
def aclrtMemGetAllocationGranularity(prop, option, granularity):
    what = "aclrtMemGetAllocationGranularity"
    if not STATE.initialised:
        raise SimError(lib.ACL_ERROR_UNINITIALIZE, f"{what}: aclInit has not been called")
    if granularity == ffi.NULL:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: granularity is nullptr")
    if option not in (lib.ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM,
                      lib.ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED):
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: option {option}")
    granularity[0] = _granularity(prop, what)   # minimum and recommended alike
    return 0


@entry
def aclrtMallocPhysical(handle, size, prop, flags):
    """Counted against the device's memory; new memory is not zero (FRESH bytes).
    The doc asks for size in granularity multiples "to save memory": another size is
    taken, but aclrtMapMem then refuses it (it wants a granularity multiple)."""
    what = "aclrtMallocPhysical"
    need_device(what)
    if handle == ffi.NULL:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: handle is nullptr")
    if flags != 0:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: flags {flags} (reserved, must be 0)")
    gran, size = _granularity(prop, what), int(size)
    if size == 0:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: size is 0")
    mem = STATE.memory
    if mem.used + size > mem.capacity:
        raise SimError(lib.ACL_ERROR_RT_MEMORY_ALLOCATION,
                       f"{what}: out of memory ({size} bytes asked, {mem.capacity - mem.used} free)")
    fd = os.memfd_create("cann-sim-physical", os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    with mmap.mmap(fd, size) as m:
        m.write(bytes([FRESH]) * size)   # uninitialised memory is not zero on a device
    mem.used += size
    handle[0] = ffi.cast("void *", STATE.physical.new(Physical(size, prop.location.id, gran, fd)))
    return 0


def _release_physical(p: Physical) -> None:
    os.close(p.fd)
    STATE.memory.used -= p.size


@entry
def aclrtFreePhysical(handle):
    """Its doc: memory still mapped is not freed until its last aclrtUnmapMem; the handle
    is dead at once."""
    p = STATE.physical.get(handle, "aclrtFreePhysical", lib.ACL_ERROR_RT_INVALID_HANDLE)
    STATE.physical.pop(handle, "aclrtFreePhysical")
    if p.mappings:
        p.freed = True
    else:
        _release_physical(p)
    return 0


@entry
def aclrtReserveMemAddress(vir_ptr, size, alignment, expect_ptr, flags):
    """Host address space aligned to the page type's granularity (flags: acl_rt.h's
    aclrtMemPgType, 0 normal / 1 huge / 2 huge 1G; ggml-cann passes 1). The doc sets
    no rule on size but "not 0": another size is rounded up to the granularity."""
    what = "aclrtReserveMemAddress"
    need_device(what)
    if vir_ptr == ffi.NULL:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: virPtr is nullptr")
    if int(size) == 0:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: size is 0")
    if alignment != 0:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: alignment {alignment} (reserved, must be 0)")
    if expect_ptr != ffi.NULL:    # acl_rt.h: "must be nullptr" (the doc's 16T-24T range is experimental)
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: expectPtr must be nullptr")
    if flags not in (0, 1, 2):
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: flags {flags} is no aclrtMemPgType")
    align = HUGE_1G if flags == 2 else HUGE_PAGE
    size = -(-int(size) // align) * align
    raw = _no_access(0, size + align)
    r = Reservation(-(-raw // align) * align, size)
    mem = STATE.memory
    bisect.insort(mem.res_starts, r.addr)
    mem.reservations[r.addr] = r
    vir_ptr[0] = ffi.cast("void *", r.addr)
    return 0


def _reservation(vir_ptr, what: str) -> Reservation:
    addr = int(ffi.cast("uintptr_t", vir_ptr))
    r = STATE.memory.reservation_at(addr) if addr else None
    if r is None:
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"{what}: {addr:#x} is not in memory reserved by aclrtReserveMemAddress")
    return r


@entry
def aclrtReleaseMemAddress(vir_ptr):
    """Its doc: unmap first. The addresses stay reserved on the host: never reused."""
    what = "aclrtReleaseMemAddress"
    r = _reservation(vir_ptr, what)
    addr = int(ffi.cast("uintptr_t", vir_ptr))
    if addr != r.addr:
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"{what}: {addr:#x} is inside the reservation at {r.addr:#x}, not its start")
    if r.maps:
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"{what}: {len(r.maps)} mapping(s) still there (aclrtUnmapMem them first)")
    mem = STATE.memory
    del mem.reservations[r.addr]
    mem.res_starts.remove(r.addr)
    return 0


@entry
def aclrtMapMem(vir_ptr, size, offset, handle, flags):
    """Its doc: size equal to the physical memory's and a multiple of the granularity,
    offset and flags 0; one reservation takes no memory of two devices. The address may
    be anywhere in a reservation (aligned to the granularity, so the host can map it),
    and the range must not overlap a mapping."""
    what = "aclrtMapMem"
    need_device(what)
    if offset != 0 or flags != 0:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                       f"{what}: offset {offset} and flags {flags} must be 0")
    p = STATE.physical.get(handle, what, lib.ACL_ERROR_RT_INVALID_HANDLE)
    r = _reservation(vir_ptr, what)
    addr, size = int(ffi.cast("uintptr_t", vir_ptr)), int(size)
    if size != p.size or size % p.granularity:
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"{what}: size {size} must be the physical memory's ({p.size}) and a "
                       f"multiple of the granularity ({p.granularity})")
    if addr % p.granularity:
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"{what}: {addr:#x} is not aligned to the granularity ({p.granularity})")
    if addr + size > r.addr + r.size:
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"{what}: [{addr:#x}, +{size}) runs past the reservation's end "
                       f"({r.addr + r.size:#x})")
    for start, (n, q) in r.maps.items():
        if start < addr + size and addr < start + n:
            raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                           f"{what}: [{addr:#x}, +{size}) overlaps the mapping at {start:#x}")
        if q.device != p.device:
            raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                           f"{what}: the reservation holds memory of device {q.device} already")
    _mmap(addr, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | _MAP_FIXED, p.fd)
    r.maps[addr] = (size, p)
    p.mappings += 1
    return 0


@entry
def aclrtUnmapMem(vir_ptr):
    """The address a mapping started at; the range is no device memory any more."""
    what = "aclrtUnmapMem"
    r = _reservation(vir_ptr, what)
    addr = int(ffi.cast("uintptr_t", vir_ptr))
    if addr not in r.maps:
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID, f"{what}: no mapping starts at {addr:#x}")
    size, p = r.maps.pop(addr)
    _no_access(addr, size)
    p.mappings -= 1
    if p.freed and not p.mappings:
        _release_physical(p)
    return 0


# stream capture into a model run instance (hicann/runtime api_ref 15 and dev_guide
# 04-01): between aclmdlRICaptureBegin and aclmdlRICaptureEnd the stream's work is
# recorded, not queued; aclmdlRIExecuteAsync queues it again, as often as asked, and it
# reads device memory when it runs. Followed from 04-01: synchronising the capturing
# stream, its events or its device is illegal in every mode, aclrtMemcpy / aclrtMemset
# in GLOBAL (any thread) and THREAD_LOCAL (the capturing thread) modes; either fails
# the capture. The docs forbid no allocation during a capture: aclrtMalloc / aclrtFree
# and the virtual memory calls are taken.

@entry
def aclmdlRICaptureBegin(stream, mode):
    what = "aclmdlRICaptureBegin"
    s = STATE.streams.get(stream, what, lib.ACL_ERROR_INVALID_PARAM)
    if mode not in (lib.ACL_MODEL_RI_CAPTURE_MODE_GLOBAL, lib.ACL_MODEL_RI_CAPTURE_MODE_THREAD_LOCAL,
                    lib.ACL_MODEL_RI_CAPTURE_MODE_RELAXED):
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: mode {mode}")
    if s.capture is not None:
        raise SimError(lib.ACL_ERROR_RT_STREAM_CAPTURED, f"{what}: the stream is capturing already")
    s.capture = Capture(int(mode), threading.get_ident())
    return 0


@entry
def aclmdlRICaptureEnd(stream, model_ri):
    """The capture ends (whatever it answers); a capture an illegal call failed gives
    ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED and no model. Outside RELAXED mode, the
    thread that began it must end it (ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD)."""
    what = "aclmdlRICaptureEnd"
    s = STATE.streams.get(stream, what, lib.ACL_ERROR_INVALID_PARAM)
    c = s.capture
    if c is None:
        raise SimError(lib.ACL_ERROR_RT_STREAM_NOT_CAPTURED, f"{what}: the stream is not capturing")
    if c.mode != lib.ACL_MODEL_RI_CAPTURE_MODE_RELAXED and c.thread != threading.get_ident():
        raise SimError(lib.ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD,
                       f"{what}: another thread began the capture")
    if model_ri == ffi.NULL:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{what}: modelRI is nullptr")
    s.capture, c.active = None, False
    if c.invalid:
        raise SimError(lib.ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED,
                       f"{what}: the capture failed: {c.invalid}")
    model_ri[0] = ffi.cast("void *", STATE.models.new(Model(c.tasks, s.device)))
    return 0


@entry
def aclmdlRIExecuteAsync(model_ri, stream):
    what = "aclmdlRIExecuteAsync"
    m = STATE.models.get(model_ri, what, lib.ACL_ERROR_RT_INVALID_HANDLE)
    s = STATE.streams.get(stream, what, lib.ACL_ERROR_INVALID_PARAM)
    if s.capture is not None:
        raise SimError(lib.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                       f"{what}: executing a model into a capture is not simulated")
    s.queue += m.tasks
    s.queue.append(ModelEnd(m))
    return 0


@entry
def aclmdlRIDestroy(model_ri):
    """A model still queued to run cannot go (ACL_ERROR_RT_MODEL_RUNNING, its meaning in
    the aclError table): synchronise first."""
    what = "aclmdlRIDestroy"
    m = STATE.models.get(model_ri, what, lib.ACL_ERROR_RT_INVALID_HANDLE)
    for s in STATE.streams.objects.values():
        if any(isinstance(t, ModelEnd) and t.model is m for t in s.queue):
            raise SimError(lib.ACL_ERROR_RT_MODEL_RUNNING,
                           f"{what}: the model is queued on a stream (synchronise it first)")
    STATE.models.pop(model_ri, what)
    return 0


# aclnn/acl_meta.h

TENSOR_DATA_ALIGN = 32   # aclCreateTensor's tensorData (aolapi operatorlist_00019)


@entry
def aclCreateTensor(view_dims, n_dims, dtype, stride, offset, fmt, storage_dims, n_storage, data):
    n_dims, n_storage, offset = int(n_dims), int(n_storage), int(offset)
    if (n_dims and view_dims == ffi.NULL) or (n_storage and storage_dims == ffi.NULL):
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, "aclCreateTensor: dims are nullptr")
    if not dtypes.known(dtype):
        raise SimError(lib.ACLNN_ERR_PARAM_INVALID,
                       f"aclCreateTensor: data type {dtypes.name(dtype)} is not simulated")
    dims = tuple(ffi.unpack(view_dims, n_dims)) if n_dims else ()
    storage = tuple(ffi.unpack(storage_dims, n_storage)) if n_storage else ()
    if stride == ffi.NULL:
        strides = tuple(math.prod(dims[i + 1:]) for i in range(n_dims))
    else:
        strides = tuple(ffi.unpack(stride, n_dims)) if n_dims else ()
    if any(d < 0 for d in dims) or offset < 0:
        raise SimError(lib.ACLNN_ERR_PARAM_INVALID, f"aclCreateTensor: negative dims {dims} / {storage}")
    if any(d < 0 for d in storage):
        message = f"aclCreateTensor: negative storage dims {list(storage)} (view dims {list(dims)})"
        if all(dims):
            raise SimError(lib.ACLNN_ERR_PARAM_INVALID, message)
        tolerate("storage-shape", message)   # an empty view reads nothing
        storage = (0,)
    # the elements the view reaches must all lie inside the storage
    n_storage_elems = math.prod(storage)
    if all(dims):
        lo = offset + sum((d - 1) * s for d, s in zip(dims, strides) if s < 0)
        hi = offset + sum((d - 1) * s for d, s in zip(dims, strides) if s > 0)
        if lo < 0 or hi >= n_storage_elems:
            message = (f"aclCreateTensor: view dims {list(dims)} strides {list(strides)} "
                       f"offset {offset} reach element {hi if hi >= n_storage_elems else lo}, "
                       f"outside the storage of {n_storage_elems} elements {list(storage)}")
            if lo < 0:
                raise SimError(lib.ACLNN_ERR_PARAM_INVALID, message)
            # tolerated: the storage is taken as reaching the view's last element, and that
            # memory must still lie in one live allocation at launch
            tolerate("storage-shape", message)
            storage = (hi + 1,)
    addr = int(ffi.cast("uintptr_t", data))
    if addr % TENSOR_DATA_ALIGN:
        # its page: "tensorData: tensor在Device侧的存储地址,该地址必须32字节对齐"; a view that
        # starts elsewhere is the aligned base plus `offset` elements
        tolerate("tensor-data-align",
                 f"aclCreateTensor: tensorData {addr:#x} is not {TENSOR_DATA_ALIGN}-byte aligned "
                 f"({addr % TENSOR_DATA_ALIGN} bytes past); pass the aligned address below it "
                 "and the view's start as `offset`")
    desc = TensorDesc(dims, strides, offset, int(dtype), int(fmt), storage, addr)
    return ffi.cast("aclTensor *", STATE.tensors.new(desc))


@entry
def aclDestroyTensor(tensor):
    STATE.tensors.pop(tensor, "aclDestroyTensor")
    return 0


@entry
def aclCreateScalar(value, dtype):
    if value == ffi.NULL:
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, "aclCreateScalar: value is nullptr")
    if not dtypes.known(dtype):
        raise SimError(lib.ACLNN_ERR_PARAM_INVALID, f"aclCreateScalar: data type {dtypes.name(dtype)}")
    raw = host_bytes(int(ffi.cast("uintptr_t", value)), dtypes.numpy_dtype(dtype).itemsize)
    v = raw.view(dtypes.numpy_dtype(dtype))[0].item()
    return ffi.cast("aclScalar *", STATE.scalars.new(ScalarDesc(v, int(dtype))))


@entry
def aclDestroyScalar(scalar):
    STATE.scalars.pop(scalar, "aclDestroyScalar")
    return 0


@entry
def aclCreateIntArray(value, size):
    size = int(size)
    if size and value == ffi.NULL:
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, "aclCreateIntArray: value is nullptr")
    return ffi.cast("aclIntArray *", STATE.int_arrays.new(tuple(int(value[i]) for i in range(size))))


@entry
def aclDestroyIntArray(array):
    STATE.int_arrays.pop(array, "aclDestroyIntArray")
    return 0


@entry
def aclCreateTensorList(value, size):
    size = int(size)
    if size and value == ffi.NULL:
        raise SimError(lib.ACLNN_ERR_PARAM_NULLPTR, "aclCreateTensorList: value is nullptr")
    items = tuple(int(ffi.cast("uintptr_t", value[i])) for i in range(size))
    for i, h in enumerate(items):
        if h not in STATE.tensors.objects:
            raise SimError(lib.ACLNN_ERR_PARAM_INVALID,
                           f"aclCreateTensorList: value[{i}] {h:#x} is not a live aclTensor")
    return ffi.cast("aclTensorList *", STATE.tensor_lists.new(items))


@entry
def aclDestroyTensorList(array):
    items = STATE.tensor_lists.pop(array, "aclDestroyTensorList")
    for h in items:   # the list owns its tensors: they are destroyed with it
        if STATE.tensors.objects.pop(h, None) is None:
            raise SimError(lib.ACLNN_ERR_PARAM_INVALID,
                           f"aclDestroyTensorList: its aclTensor {h:#x} was already destroyed")
    return 0


# ---------------------------------------------------------------- binding ----

# Every refusal on stderr: a foreign client (ggml-cann through the simulated toolkit) may
# ignore a NULL descriptor and hand it to the next call, whose error then hides the rule
# that really refused. CANN_SIM_LOG=1 / 0 forces it on / off; by default it is on in a
# toolkit client and off in ops' own layer, which reports every refusal itself.
LOG_REFUSALS = os.environ.get("CANN_SIM_LOG", "1" if "_cannsim" in sys.modules else "0") == "1"


# Rules a client may be let off (CANN_SIM_ALLOW=<rule>,...; read at aclInit), so that one
# documented violation does not hide everything behind it; each use is still printed as a
# finding. The real memory-safety checks stay.
RELAXATIONS = {
    "storage-shape": "aclCreateTensor: the storage shape need not cover the view (an empty "
                     "view may have negative storage dims); the memory the view reaches must "
                     "still lie in one live allocation when an operator runs",
    "tensor-data-align": "aclCreateTensor: tensorData need not be 32-byte aligned (its page "
                         "says it must be, or the behaviour is undefined); ggml-cann hands a "
                         "view's own data pointer (tensor->data, base + view offset) instead "
                         "of the aligned base and an element offset",
    "fias-strided-inputs": "aclnnFusedInferAttentionScoreV2: key, value and pseShift may be "
                           "strided views (its page marks them non-contiguous ×; the 910B CI "
                           "passes ggml-cann's FLASH_ATTN_EXT, which hands over ggml's K / V "
                           "with BSND strides and a mask broadcast over heads by a 0 stride)",
    "origin-format": "an operator whose page lists format ND only takes an origin format "
                     "(NCL, NCHW, NHWC, NCDHW, NDHWC, NC) tagging the same plain memory (the "
                     "910B CI passes ggml-cann's CONV_TRANSPOSE_1D, which zeroes an NCL dst)",
    "scalar-out-shape": "a reduction to a 0-d result takes a [1] out (the 910B CI passes "
                        "ggml-cann's CROSS_ENTROPY_LOSS, whose ReduceSum writes a [1] out)",
    "unoffered-operator": "an aclnn operator that neither its page nor its kernel "
                          "registration offers on the simulated SoC (soc.UNOFFERED: on the "
                          "310P aclnnCircularPad2d, FusedInferAttentionScoreV2, "
                          "RotaryPositionEmbedding) runs there as on the 910B",
    "async-copy-align": "aclrtMemcpyAsync takes device addresses that are not 64-byte aligned "
                        "(an older page asked for it, the current hicann/runtime one does not; "
                        "the 910B CI passes ggml-cann's IM2COL, which copies from 32-byte offsets)",
}


def _allowed_from_env() -> frozenset[str]:
    names = frozenset(n for n in os.environ.get("CANN_SIM_ALLOW", "").split(",") if n)
    unknown = sorted(names - RELAXATIONS.keys())
    if unknown:
        raise SimError(lib.ACL_ERROR_INVALID_PARAM,
                       f"CANN_SIM_ALLOW: unknown rule {unknown[0]!r} (known: {', '.join(RELAXATIONS)})")
    return names


def tolerate(rule: str, message: str) -> None:
    """A documented rule broken: refused, unless CANN_SIM_ALLOW lets the client off."""
    if rule not in STATE.allowed:
        raise SimError(lib.ACLNN_ERR_PARAM_INVALID, message)
    if LOG_REFUSALS:
        print(f"CANN-SIM tolerated [{rule}]: {message}", file=sys.stderr, flush=True)


def refused(message: str) -> None:
    STATE.last_error = message
    if LOG_REFUSALS:
        print(f"CANN-SIM refused: {message}", file=sys.stderr, flush=True)


def guarded(name: str, fn: Callable, failure_code: int):
    """The C-callable wrapper: a refusal returns its code (or NULL for functions that
    return pointers) and sets aclGetRecentErrMsg; a bug in the simulator itself is
    reported the same way, never raised into C."""
    returns_pointer = ffi.typeof(getattr(lib, "sim_" + name)).result.kind == "pointer"

    def wrapper(*args):
        try:
            return fn(*args)
        except SimError as e:
            refused(str(e))
            return ffi.NULL if returns_pointer else e.code
        except Exception as e:  # noqa: BLE001 - a simulator bug must not unwind into C
            refused(f"{name}: CANN simulator internal error: {e!r}\n" + traceback.format_exc(limit=4))
            return ffi.NULL if returns_pointer else failure_code
    wrapper.__name__ = name
    return wrapper


def api_entries() -> list[tuple[str, int]]:
    kind = ffi.new("int *")
    out = []
    for i in range(lib.ops_api_count()):
        name = ffi.string(lib.ops_api_entry(i, kind)).decode()
        out.append((name, kind[0]))
    return out


def attach() -> None:
    for name, kind in api_entries():
        if kind != 0:
            continue
        fn = RUNTIME.get(name)
        if fn is None:
            def fn(*args, _name=name):
                raise SimError(lib.ACL_ERROR_API_NOT_SUPPORT, f"{_name} is not simulated")
        ffi.def_extern(name="sim_" + name)(guarded(name, fn, lib.ACL_ERROR_INTERNAL_ERROR))
