"""Entry points for ACL's lifetime, devices and contexts: aclInit / aclFinalize, setting and
resetting a device, peer access, the current context per thread, the SoC name and memory
information."""
from __future__ import annotations

import sys
import threading

from .binding import ffi, lib

from . import blame, cost, faults, trace
from .entries import entry
from .hygiene import flag_from_env, switches_from_env
from .memory import FRESH, POISON
from .refusals import SimError, allowed_from_env
from .state import (DEVICE_COUNT, STATE, align_from_env, check_device, need_device, report_leaks,
                    seed_from_env, soc_from_env)

# CANN_SIM_TRACE=1: a toolkit client's calls recorded into its stdout (trace.start_stream)
TRACE_SWITCH = "CANN_SIM_TRACE"
# CANN_SIM_BLAME=1 (with CANN_SIM_TRACE=1): each operator call evaluated again in float64 on
# its inputs as it runs, its own error framed after its record (one case's rerun: ops tbo)
BLAME_SWITCH = "CANN_SIM_BLAME"
# CANN_SIM_SITES=0: the records without their call sites (trace._site), to measure what
# taking them costs
SITES_SWITCH = "CANN_SIM_SITES"


@entry
def aclInit(config_path):
    if STATE.initialised or STATE.finalised:
        raise SimError(lib.ACL_ERROR_REPEAT_INITIALIZE, "aclInit: only once per process")
    try:
        STATE.soc = soc_from_env()
        STATE.memory.align = align_from_env()
        STATE.allowed = allowed_from_env()
        STATE.seed = seed_from_env()
        poison, STATE.check_inputs = switches_from_env()
        STATE.memory.fresh = POISON if poison else FRESH
        stream = flag_from_env(TRACE_SWITCH)
        data = flag_from_env(BLAME_SWITCH)
        sites = flag_from_env(SITES_SWITCH, default="1")
        STATE.fault = faults.fault_from_env()
        counted = flag_from_env(cost.COST_SWITCH)
    except SimError as e:
        raise SimError(e.code, f"aclInit: {e}") from None
    STATE.initialised = True
    if stream and "_cannsim" in sys.modules:   # a toolkit client; ops' own layer records per case
        trace.EVALUATE = blame.evaluate_one
        trace.start_stream({"simulator": "CANN-SIM", "soc": STATE.soc, "poison": poison,
                            "check_inputs": STATE.check_inputs, "allow": sorted(STATE.allowed),
                            "cost": counted, **({"blame": True} if data else {}),
                            **({"fault": STATE.fault} if STATE.fault else {})}, data, sites)
        if counted:   # CANN_SIM_COST=1: the device work counted, its events in the same stream
            cost.start_stream()
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


@entry
def aclrtSetDevice(device_id):
    d = check_device(device_id, "aclrtSetDevice")
    STATE.device_refs[d] += 1
    if d not in STATE.device_context:
        STATE.device_context[d] = STATE.contexts.new(d)
    STATE.current[threading.get_ident()] = STATE.device_context[d]
    return 0


@entry
def aclrtResetDevice(device_id):
    d = check_device(device_id, "aclrtResetDevice")
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
        check_device(d, what)
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
