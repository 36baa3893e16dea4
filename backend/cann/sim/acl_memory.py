"""Entry points for device memory: aclrtMalloc / aclrtFree and their host twins, the
synchronous and asynchronous copies, aclrtMemset, and the virtual memory API (physical
memory, reserved addresses, map and unmap)."""
from __future__ import annotations

import bisect
import mmap
import os
import threading

from .binding import ffi, lib

from .entries import entry
from .memory import (FRESH, HUGE_1G, HUGE_PAGE, MAP_FIXED, Physical, Reservation, host_bytes, host_mmap,
                     no_access)
from .refusals import SimError
from .state import STATE, check_device, need_device, soc_family, tolerate
from .streams import enqueue, get_stream, refuse_in_capture, run_stream

ASYNC_COPY_ALIGN = 64             # aclrtMemcpyAsync: src and dst 64-byte aligned (its doc)


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
        refuse_in_capture(c, 0, f"{what} during the capture")
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
            raise refuse_in_capture(s.capture, lib.ACL_ERROR_RT_STREAM_CAPTURED,
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
    check_device(prop.location.id, what)
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
    raw = no_access(0, size + align)
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
    host_mmap(addr, size, mmap.PROT_READ | mmap.PROT_WRITE, mmap.MAP_SHARED | MAP_FIXED, p.fd)
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
    no_access(addr, size)
    p.mappings -= 1
    if p.freed and not p.mappings:
        _release_physical(p)
    return 0
