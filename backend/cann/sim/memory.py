"""Device memory: aclrtMalloc / aclrtMallocHost allocations tracked by address, and the
virtual memory API's reservations and physical memory, mapped into host address space.

Device memory is real host memory (NumPy buffers, or a memfd mapped into reserved host
address space for aclrtMapMem), so the native layer's pointer arithmetic works."""
from __future__ import annotations

import bisect
import collections
import mmap
import os
from dataclasses import dataclass, field

import numpy as np

from .binding import ffi, lib

from .refusals import SimError

# aclrtMalloc returns 64-byte aligned addresses (its doc), and here never more than
# that: every address is an odd multiple of 64, so code that assumes more fails.
# CANN_SIM_MALLOC_ALIGN (read at aclInit; a power of two >= 64) raises the guarantee for a
# client that relies on more than the doc promises: ggml-cann's buffer type declares 128
# (docs/ggml-cann-on-cann-sim.md records it), and everything behind that would go untested.
ALIGN = 64
FRESH, POISON = 0xA5, 0xFF        # bytes of new and of freed memory
QUARANTINE_BYTES = 256 << 20      # freed memory kept poisoned before it really goes
HUGE_PAGE, HUGE_1G = 2 << 20, 1 << 30   # granularities of ACL_HBM_MEM_HUGE / _HUGE1G (aclrtMallocPhysical's doc)


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
        self.fresh = FRESH        # the bytes of new memory: POISON with CANN_SIM_POISON (sim/hygiene.py)
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
        a.buf[:] = self.fresh     # uninitialised memory is not zero on a device
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

PROT_NONE, MAP_FIXED, MAP_NORESERVE = 0, 0x10, 0x4000   # Linux values the mmap module lacks
_libc = None     # mmap(2) through cffi's ABI mode: the mmap module cannot map at an address


def host_mmap(addr: int | None, size: int, prot: int, flags: int, fd: int = -1) -> int:
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


def no_access(addr: int, size: int) -> int:
    return host_mmap(addr, size, PROT_NONE,
                 mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE | (MAP_FIXED if addr else 0))


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
