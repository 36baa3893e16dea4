"""The simulated ACL runtime: RUNTIME, every entry point of the acl_<header>.py modules
(imported here), and attach(), which serves them to the native layer's `extern "Python"`
functions.

Its rooms: refusals.py (SimError, CANN_SIM_ALLOW's RELAXATIONS), memory.py (allocations
and virtual memory), state.py (STATE: SoC, handles, contexts; tolerate, leak reports),
streams.py (streams, events, capture), descriptors.py (TensorDesc, ScalarDesc),
entries.py (RUNTIME, @entry, guarded), then the entry points: acl_device.py (aclInit,
devices, contexts), acl_memory.py (malloc, copies, virtual memory), acl_stream.py
(streams, events, aclmdlRI capture), acl_meta.py (aclTensor & co)."""
from __future__ import annotations

from .binding import ffi, lib

from . import acl_device, acl_memory, acl_meta, acl_stream  # noqa: F401 - each registers its entry points
from .entries import RUNTIME, api_entries, guarded
from .refusals import SimError


def attach() -> None:
    for name, kind in api_entries():
        if kind != 0:
            continue
        fn = RUNTIME.get(name)
        if fn is None:
            def fn(*args, _name=name):
                raise SimError(lib.ACL_ERROR_API_NOT_SUPPORT, f"{_name} is not simulated")
        ffi.def_extern(name="sim_" + name)(guarded(name, fn, lib.ACL_ERROR_INTERNAL_ERROR))
