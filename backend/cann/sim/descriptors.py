"""The aclnn descriptors of aclnn/acl_meta.h as the simulator holds them: an aclTensor's
view onto device memory (TensorDesc) and an aclScalar's value (ScalarDesc)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .binding import lib

from . import dtypes
from .refusals import SimError
from .state import STATE

# a byte's two INT4 elements (low nibble first), sign-extended: one table look-up per byte
INT4_PAIRS = ((np.arange(256)[:, None] >> np.array([0, 4])) & 0xF).astype(np.int8)
INT4_PAIRS[INT4_PAIRS >= 8] -= 16


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


def reach(offset: int, dims, strides) -> tuple[int, int]:
    """The first and last element (inclusive) a view of non-empty `dims` reaches from the
    storage's start: negative strides reach below `offset`, positive ones above it."""
    return (offset + sum((d - 1) * s for d, s in zip(dims, strides) if s < 0),
            offset + sum((d - 1) * s for d, s in zip(dims, strides) if s > 0))


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
    value: Any         # a Python number
    dtype: int
