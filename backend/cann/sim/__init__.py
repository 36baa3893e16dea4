"""The CANN simulator (device CANN-SIM): the ACL runtime and the aclnn operators that
the native layer calls, implemented on the CPU with NumPy.

It simulates aclnn, not ggml: every operator follows its public aclnn documentation
(accepted dtypes and shapes, type promotion and conversion, broadcasting, the documented
return codes) and knows nothing of ggml's ops or of the NumPy reference. So a case
passes on CANN-SIM only if the native layer's composition of aclnn calls is right.

It is stricter than hardware, so that the native layer's mistakes show:
  * work launched on a stream runs only when the stream (or an event recorded on it) is
    synchronised: reading results without synchronising reads stale memory;
  * freed device memory is poisoned (0xFF bytes: NaN for every float type) and kept in
    quarantine, so a stale read sees poison and a stale write is an error;
  * a tensor descriptor whose view reaches outside its storage, or whose tensorData is not
    32-byte aligned (its page; a view starting elsewhere is described by the aligned base
    and an element offset), is rejected by aclCreateTensor; at launch, the storage must
    lie inside one live allocation;
  * an aclOpExecutor runs once; a workspace smaller than GetWorkspaceSize asked for is
    rejected (non-contiguous inputs really are gathered into the workspace);
  * device memory is counted against the simulated device's capacity, and whatever is
    still allocated, created or never launched when the device closes (its last
    aclrtResetDevice) or at aclFinalize is reported as a leak: device and pinned host
    memory, streams, events, descriptors, and executors that were neither launched nor
    (made repeatable and) destroyed;
  * dtype rules are opbase's (opdev/data_type_utils.h): PromoteType's table, and CanCast,
    which refuses float -> integral, complex -> real and anything but bool -> bool;
  * precision is the device's (docs/cann-sim-dtypes.md, "Precision model"): inputs cast to
    the deduced type, a half type's result rounded to it before the cast to out, kernels
    in f32 (never float64 unless an operand is DOUBLE), the 910B cube's math modes (HF32's
    11 mantissa bits, USE_FP16's f16 output);
  * the runtime's documented limits: aclrtMalloc addresses are 64-byte aligned and never
    more (odd multiples of 64); aclrtMemcpyAsync wants both addresses 64-byte aligned
    (ACL_ERROR_RT_ADDR_UNALIGNED) and no host-to-host copy
    (ACL_ERROR_RT_FEATURE_NOT_SUPPORT); with pageable (not aclrtMallocHost) host memory
    it returns only once the copy and the work queued before it ran (its current page);
    memory kinds must match the pointers; a NULL stream is the device's default stream;
    CANN_SIM_MALLOC_ALIGN raises aclrtMalloc's alignment for a client that needs more;
  * the current context is per thread: a thread that has not called aclrtSetDevice or
    aclrtSetCurrentContext cannot create streams or events, allocate, copy or set memory
    (ACL_ERROR_RT_CONTEXT_NULL); aclrtGetDevice without one is that error too;
  * aclrtStreamWaitEvent: the waiting stream's later work runs after the recording
    stream's work up to the event's latest record (synchronising the waiting stream runs
    that much of the other); an event from aclrtCreateEventWithFlag without
    ACL_EVENT_SYNC cannot be waited for, one without ACL_EVENT_TIME_LINE gives no
    elapsed time; aclrtSynchronizeDevice runs every stream of the device; a device is
    never its own peer (aclrtDeviceCanAccessPeer / EnablePeerAccess);
  * virtual memory (aclrtReserveMemAddress / aclrtMallocPhysical / aclrtMapMem):
    reserved addresses are never reused; physical memory is counted as device memory;
    a mapping must be the physical size, a multiple of the granularity (2 MiB for
    ACL_HBM_MEM_HUGE, 1 GiB for HUGE1G, which 310P lacks), inside the reservation and
    overlapping no other; mapped ranges are device memory for operators and copies,
    unmapped ones are not; a reservation is released only once unmapped; physical
    memory freed while mapped goes at its last unmap (its doc); reservations and
    physical handles still held are leaks;
  * stream capture (aclmdlRICaptureBegin / End): work launched on a capturing stream is
    recorded into the model, which aclmdlRIExecuteAsync replays (reading memory as it
    is then) and aclmdlRIDestroy releases (refused while queued: ACL_ERROR_RT_MODEL_RUNNING;
    never destroyed: a leak). During a capture, synchronising its stream or device
    (ACL_ERROR_RT_STREAM_CAPTURED) or an event it recorded (ACL_ERROR_RT_EVENT_CAPTURED),
    and aclrtMemcpy / aclrtMemset in GLOBAL or (on the capturing thread) THREAD_LOCAL
    mode (ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT) are refused and fail the capture:
    aclmdlRICaptureEnd then gives ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED; outside
    RELAXED mode, only the capturing thread may end it;
  * what a page leaves open is not one fixed choice: aclnnArgsort promises no order of
    equal keys (its page: deterministic, not stable), so the simulator orders them by a
    permutation drawn from CANN_SIM_SEED (default: the process id; the same seed and
    input give the same order);
  * the simulated SoC is CANN_SIM_SOC (default Ascend910B3; Ascend310P3, ...), which
    aclrtGetSocName reports and state.soc_family() gives operators; an unknown one
    fails aclInit.

`install()` attaches the Python implementations to the `extern "Python"` entry points of
cannops.native._aclnn; runtime.py gathers the ACL runtime (its rooms: refusals, memory,
state, streams, descriptors, entries and the acl_<header>.py entry points), aclnn.py the
operator framework and ops_<family>.py the operators.
"""
from __future__ import annotations

import functools

from cannops.cases.plugins import load_plugins


@functools.cache   # once per process (not cached when attaching raised: the next call tries again)
def install() -> None:
    """Attach every simulated entry point: every ops_<family>.py module's operators too."""
    from . import aclnn, runtime
    load_plugins(__name__, prefix="ops_")
    runtime.attach()
    aclnn.attach()
