"""The ggml library handle that the ggml backend's modules share: the cffi bridge's ffi
and lib, the guarded lib whose failed GGML_ASSERTs raise instead of aborting, and the
prefix of the devices' names. A bridge built against a ggml that lacks what the devices
need (REQUIRED) is not loaded: one line names the symbol."""
from __future__ import annotations

import re
from typing import Callable

from cannops.backend.base import DeviceError

try:
    from cannops.native._ggml import ffi, lib
except ImportError as e:  # reported by backend.base as an unavailable provider
    raise ImportError(f"the ggml bridge cannops.native._ggml is not built ({e}); "
                      "build it with `make native` (or `python -m cannops.native.build`)") from e

# what the devices call on any ggml: the backend registry, buffers, graphs (a ggml older
# than its device API cannot be bound); constructors of single ops are looked up per case
REQUIRED = ("ggml_version", "ggml_init", "ggml_new_tensor", "ggml_new_graph_custom",
            "ggml_build_forward_expand", "ggml_backend_dev_count", "ggml_backend_dev_get",
            "ggml_backend_dev_supports_op", "ggml_backend_dev_init", "ggml_backend_graph_compute",
            "ggml_backend_alloc_ctx_tensors", "ggml_backend_tensor_set", "ggml_backend_tensor_get")
_missing = [name for name in REQUIRED if not hasattr(lib, name)]
if _missing:
    raise ImportError(f"the ggml bridge cannot bind this ggml: it has no {_missing[0]}"
                      + (f" (nor {', '.join(_missing[1:])})" if len(_missing) > 1 else ""))

class TooOld(DeviceError):
    """What this ggml cannot build of a newer case graph (a constructor or a form it does not
    have yet): the device does not support the case, as for a missing constructor."""


PREFIX = "GGML-"   # a ggml device is GGML-<ggml device name>: GGML-CPU, GGML-CUDA0
GUARD = "cannops_guard_"


class GuardedLib:
    """The bridge's lib, where each ggml.h function that takes a context or a graph is
    its guarded twin: a failed GGML_ASSERT raises DeviceError instead of aborting."""

    ffi = ffi

    def __getattr__(self, name: str):
        twin = getattr(lib, GUARD + name, None)
        value = getattr(lib, name) if twin is None else _guarded(name, twin)
        setattr(self, name, value)  # looked up once
        return value


def _guarded(name: str, twin) -> Callable:
    if ffi.typeof(ffi.addressof(lib, name)).result.kind == "void":
        def call(*args):
            if twin(*args):
                raise DeviceError(f"{name}: {_abort_message()}")
    else:
        def call(*args):
            r = twin(*args)
            if not r and lib.cannops_guard_message()[0] != b"\0":  # NULL from an abort
                raise DeviceError(f"{name}: {_abort_message()}")
            return r
    call.__name__ = name
    return call


def _abort_message() -> str:
    return ffi.string(lib.cannops_guard_message()).decode(errors="replace")


G = GuardedLib()


_UNBOUND = re.compile(r"has no function, constant or global variable named '(\w+)'")


def unbound_symbol(error: AttributeError) -> str | None:
    """The ggml function an AttributeError of the bridge's lib names, else None."""
    m = _UNBOUND.search(str(error))
    return m[1] if m else None


def libdir() -> str:
    """The folder of the libggml the bridge loaded."""
    return ffi.string(lib.cannops_ggml_libdir()).decode()


def ggml_version() -> str:
    return ffi.string(lib.ggml_version()).decode()
