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
  * a tensor descriptor whose view reaches outside its storage is rejected by
    aclCreateTensor; at launch, the storage must lie inside one live allocation;
  * an aclOpExecutor runs once; a workspace smaller than GetWorkspaceSize asked for is
    rejected (non-contiguous inputs really are gathered into the workspace);
  * device memory is counted against the simulated device's capacity, and whatever is
    still allocated, created or never launched when the device closes (its last
    aclrtResetDevice) or at aclFinalize is reported as a leak: device and pinned host
    memory, streams, events, descriptors, and executors that were neither launched nor
    (made repeatable and) destroyed;
  * dtype rules are opbase's (opdev/data_type_utils.h): PromoteType's table, and CanCast,
    which refuses float -> integral, complex -> real and anything but bool -> bool;
  * the runtime's documented limits: aclrtMalloc addresses are 64-byte aligned and never
    more (odd multiples of 64); aclrtMemcpyAsync wants both addresses 64-byte aligned
    (ACL_ERROR_RT_ADDR_UNALIGNED), pinned host memory from aclrtMallocHost for
    host<->device copies (ACL_ERROR_RT_INVALID_MEMORY_TYPE) and no host-to-host copy
    (ACL_ERROR_RT_FEATURE_NOT_SUPPORT); memory kinds must match the pointers;
  * the current context is per thread: a thread that has not called aclrtSetDevice or
    aclrtSetCurrentContext cannot create streams or events, allocate, copy or set memory
    (ACL_ERROR_RT_CONTEXT_NULL).

`install()` attaches the Python implementations to the `extern "Python"` entry points of
cannops.native._aclnn; runtime.py holds the runtime, aclnn.py the operator framework and
ops_<family>.py the operators.
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
