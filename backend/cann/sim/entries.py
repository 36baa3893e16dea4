"""The table of simulated entry points (RUNTIME, filled by @entry) and the wrapper that
makes one C-callable: a refusal becomes its return code and aclGetRecentErrMsg."""
from __future__ import annotations

import traceback
from typing import Callable

from .binding import ffi, lib

from . import cost, trace
from .refusals import SimError
from .state import refused

RUNTIME: dict[str, Callable] = {}


def entry(fn):
    RUNTIME[fn.__name__] = fn
    return fn


def guarded(name: str, fn: Callable, failure_code: int):
    """The C-callable wrapper: a refusal returns its code (or NULL for functions that
    return pointers) and sets aclGetRecentErrMsg; a bug in the simulator itself is
    reported the same way, never raised into C."""
    returns_pointer = ffi.typeof(getattr(lib, "sim_" + name)).result.kind == "pointer"

    def wrapper(*args):
        try:
            r = fn(*args)
            if trace.ON and name in trace.RECORDED:
                trace.runtime_call(name, args, r or 0)
            if cost.ON:
                cost.runtime(name, args)
            return r
        except SimError as e:
            refused(str(e))
            if trace.ON:
                trace.runtime_call(name, args, e.code, str(e))
            return ffi.NULL if returns_pointer else e.code
        except Exception as e:  # noqa: BLE001 - a simulator bug must not unwind into C
            refused(f"{name}: CANN simulator internal error: {e!r}\n" + traceback.format_exc(limit=4))
            if trace.ON:
                trace.runtime_call(name, args, failure_code, f"CANN simulator internal error: {e!r}")
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
