"""The simulated ACL runtime: device memory, streams, events, and the aclTensor /
aclScalar / aclIntArray descriptors of aclnn/acl_meta.h.

Device memory is real host memory (NumPy buffers), so the native layer's pointer
arithmetic works; it is tracked by address. Handles (streams, events, descriptors,
executors) are opaque addresses that are never reused, so a destroyed handle is
recognised as such.
"""
from __future__ import annotations

import bisect
import collections
import functools
import itertools
import math
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .binding import ffi, lib

from . import dtypes

SOC_NAME = "Ascend910B1"          # whose aclnn rules the simulator follows
DEVICE_COUNT = 1
DEVICE_MEMORY = 8 << 30           # bytes of simulated device memory
HOST_PINNED = 4 << 30             # bytes of aclrtMallocHost memory
# aclrtMalloc returns 64-byte aligned addresses (its doc), and here never more than
# that: every address is an odd multiple of 64, so code that assumes more fails.
ALIGN = 64
ASYNC_COPY_ALIGN = 64             # aclrtMemcpyAsync: src and dst 64-byte aligned (its doc)
FRESH, POISON = 0xA5, 0xFF        # bytes of new and of freed memory
# a byte's two INT4 elements (low nibble first), sign-extended: one table look-up per byte
INT4_PAIRS = ((np.arange(256)[:, None] >> np.array([0, 4])) & 0xF).astype(np.int8)
INT4_PAIRS[INT4_PAIRS >= 8] -= 16
QUARANTINE_BYTES = 256 << 20      # freed memory kept poisoned before it really goes


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
        self.malloc_name, self.free_name = malloc, free
        self.used = 0
        self.starts: list[int] = []            # sorted addresses of known allocations
        self.by_addr: dict[int, Allocation] = {}
        self.quarantine: collections.deque[Allocation] = collections.deque()
        self.quarantined = 0

    def malloc(self, size: int) -> int:
        if size == 0:
            raise SimError(lib.ACL_ERROR_INVALID_PARAM, f"{self.malloc_name}: size is 0")
        if self.used + size > self.capacity:
            raise SimError(lib.ACL_ERROR_RT_MEMORY_ALLOCATION,
                           f"{self.malloc_name}: out of memory ({size} bytes asked, "
                           f"{self.capacity - self.used} free)")
        raw = np.empty(size + 2 * ALIGN, np.uint8)
        base = raw.__array_interface__["data"][0]   # the buffer's address
        skip = -base % ALIGN
        skip += ALIGN if (base + skip) % (2 * ALIGN) == 0 else 0   # 64-aligned, not 128
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
        """The known allocation holding [addr, addr + size), live or freed."""
        i = bisect.bisect_right(self.starts, addr) - 1
        if i < 0:
            return None
        a = self.by_addr[self.starts[i]]
        return a if addr + size <= a.addr + a.size else None

    def bytes(self, addr: int, size: int, what: str, write: bool = False) -> np.ndarray:
        """A uint8 view of device memory; reading freed memory gives its poison."""
        a = self.find(addr, size)
        if a is None:
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


# ------------------------------------------------------------- descriptors ----

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

    @property
    def np_dtype(self) -> np.dtype:
        return dtypes.numpy_dtype(self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.dims)

    @functools.cached_property   # storage and dtype never change
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
class Stream:
    queue: list[Callable[[], None]] = field(default_factory=list)


@dataclass(eq=False)
class Event:
    stream: int | None = None
    time: float | None = None


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
        self.events = Handles("aclrtEvent", 0x5F_0000_0000)
        self.tensors = Handles("aclTensor", 0x7E_0000_0000)
        self.scalars = Handles("aclScalar", 0x7F_0000_0000)
        self.int_arrays = Handles("aclIntArray", 0x80_0000_0000)
        self.tensor_lists = Handles("aclTensorList", 0x82_0000_0000)   # -> tensor handles
        self.executors = Handles("aclOpExecutor", 0x81_0000_0000)
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
    for kind in ("streams", "events", "tensors", "scalars", "int_arrays", "tensor_lists"):
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
        del STATE.contexts.objects[STATE.device_context.pop(d)]
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
    return STATE.c_string(SOC_NAME) if STATE.initialised else ffi.NULL


@entry
def aclrtGetMemInfo(attr, free, total):
    need_device("aclrtGetMemInfo")
    total[0] = STATE.memory.capacity
    free[0] = STATE.memory.capacity - STATE.memory.used
    return 0


@entry
def aclrtCreateStream(stream):
    need_device("aclrtCreateStream")
    stream[0] = ffi.cast("void *", STATE.streams.new(Stream()))
    return 0


@entry
def aclrtDestroyStream(stream):
    s = STATE.streams.pop(stream, "aclrtDestroyStream")
    if s.queue:   # destroying a stream does not run its work: the caller forgot a sync
        raise SimError(lib.ACL_ERROR_RT_PARAM_INVALID,
                       f"aclrtDestroyStream: {len(s.queue)} task(s) queued and never synchronised")
    return 0


def run_stream(s: Stream) -> None:
    """Execute the queued work in order; the first failure empties the stream."""
    while s.queue:
        task = s.queue.pop(0)
        try:
            task()
        except Exception as e:
            s.queue.clear()
            raise SimError(lib.ACL_ERROR_RT_AICORE_EXCEPTION, f"task failed on the stream: {e}") from e


@entry
def aclrtSynchronizeStream(stream):
    run_stream(STATE.streams.get(stream, "aclrtSynchronizeStream", lib.ACL_ERROR_INVALID_PARAM))
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
    if asynchronous:
        _check_async_copy(d, s, count, kind, dev_dst, dev_src, what)
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
    return copy


def _check_async_copy(d, s, count, kind, dev_dst, dev_src, what):
    """aclrtMemcpyAsync's documented limits (acl_rt API reference, aclrtMemcpyAsync):
    no host-to-host copy (ACL_ERROR_RT_FEATURE_NOT_SUPPORT), both addresses 64-byte
    aligned, and the host side of a host<->device copy allocated by aclrtMallocHost.
    The docs give no code for the last two: a misaligned address is refused with
    ACL_ERROR_RT_ADDR_UNALIGNED, and ordinary (pageable) host memory, which the docs say
    "does not report an error but fails unpredictably when the task runs", with
    ACL_ERROR_RT_INVALID_MEMORY_TYPE, at the call, where the simulator can name it."""
    if kind == lib.ACL_MEMCPY_HOST_TO_HOST:
        raise SimError(lib.ACL_ERROR_RT_FEATURE_NOT_SUPPORT,
                       f"{what}: ACL_MEMCPY_HOST_TO_HOST is not supported asynchronously")
    for addr, role in ((d, "dst"), (s, "src")):
        if addr % ASYNC_COPY_ALIGN:
            raise SimError(lib.ACL_ERROR_RT_ADDR_UNALIGNED,
                           f"{what}: {role} {addr:#x} is not {ASYNC_COPY_ALIGN}-byte aligned "
                           f"(offset {addr % ASYNC_COPY_ALIGN})")
    for addr, on_dev, role in ((d, dev_dst, "dst"), (s, dev_src, "src")):
        pinned = None if on_dev else STATE.host.find(addr, count)
        if not on_dev and (pinned is None or not pinned.live):
            raise SimError(lib.ACL_ERROR_RT_INVALID_MEMORY_TYPE,
                           f"{what}: host {role} [{addr:#x}, +{count}) is not memory from "
                           "aclrtMallocHost (an asynchronous host<->device copy needs it)")


@entry
def aclrtMemcpy(dst, dest_max, src, count, kind):
    if count:
        # synchronous, but not ordered after stream work: results need a stream sync
        _copy_plan(dst, dest_max, src, count, kind, "aclrtMemcpy")()
    return 0


@entry
def aclrtMemcpyAsync(dst, dest_max, src, count, kind, stream):
    s = STATE.streams.get(stream, "aclrtMemcpyAsync", lib.ACL_ERROR_INVALID_PARAM)
    if count:
        s.queue.append(_copy_plan(dst, dest_max, src, count, kind, "aclrtMemcpyAsync", True))
    return 0


@entry
def aclrtMemset(dev_ptr, max_count, value, count):
    need_device("aclrtMemset")
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


@entry
def aclrtDestroyEvent(event):
    STATE.events.pop(event, "aclrtDestroyEvent")
    return 0


@entry
def aclrtRecordEvent(event, stream):
    e = STATE.events.get(event, "aclrtRecordEvent", lib.ACL_ERROR_INVALID_PARAM)
    s = STATE.streams.get(stream, "aclrtRecordEvent", lib.ACL_ERROR_INVALID_PARAM)
    e.stream, e.time = int(ffi.cast("uintptr_t", stream)), None

    def mark():
        e.time = time.perf_counter()
    s.queue.append(mark)
    return 0


@entry
def aclrtSynchronizeEvent(event):
    e = STATE.events.get(event, "aclrtSynchronizeEvent", lib.ACL_ERROR_INVALID_PARAM)
    if e.stream is not None and e.stream in STATE.streams.objects:
        run_stream(STATE.streams.objects[e.stream])
    return 0


@entry
def aclrtEventElapsedTime(ms, start, end):
    a = STATE.events.get(start, "aclrtEventElapsedTime", lib.ACL_ERROR_INVALID_PARAM)
    b = STATE.events.get(end, "aclrtEventElapsedTime", lib.ACL_ERROR_INVALID_PARAM)
    if a.time is None or b.time is None:
        raise SimError(lib.ACL_ERROR_RT_EVENT_NOT_COMPLETE,
                       "aclrtEventElapsedTime: an event has not completed (synchronise it first)")
    ms[0] = (b.time - a.time) * 1e3
    return 0


# aclnn/acl_meta.h

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
    if any(d < 0 for d in dims + storage) or offset < 0:
        raise SimError(lib.ACLNN_ERR_PARAM_INVALID, f"aclCreateTensor: negative dims {dims} / {storage}")
    # the elements the view reaches must all lie inside the storage
    n_storage_elems = math.prod(storage)
    if all(dims):
        lo = offset + sum((d - 1) * s for d, s in zip(dims, strides) if s < 0)
        hi = offset + sum((d - 1) * s for d, s in zip(dims, strides) if s > 0)
        if lo < 0 or hi >= n_storage_elems:
            raise SimError(lib.ACLNN_ERR_PARAM_INVALID,
                           f"aclCreateTensor: view dims {list(dims)} strides {list(strides)} "
                           f"offset {offset} reach element {hi if hi >= n_storage_elems else lo}, "
                           f"outside the storage of {n_storage_elems} elements {list(storage)}")
    desc = TensorDesc(dims, strides, offset, int(dtype), int(fmt), storage,
                      int(ffi.cast("uintptr_t", data)))
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

def guarded(name: str, fn: Callable, failure_code: int):
    """The C-callable wrapper: a refusal returns its code (or NULL for functions that
    return pointers) and sets aclGetRecentErrMsg; a bug in the simulator itself is
    reported the same way, never raised into C."""
    returns_pointer = ffi.typeof(getattr(lib, "sim_" + name)).result.kind == "pointer"

    def wrapper(*args):
        try:
            return fn(*args)
        except SimError as e:
            STATE.last_error = str(e)
            return ffi.NULL if returns_pointer else e.code
        except Exception as e:  # noqa: BLE001 - a simulator bug must not unwind into C
            STATE.last_error = (f"{name}: CANN simulator internal error: {e!r}\n"
                                + traceback.format_exc(limit=4))
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
