"""The simulator's ACL runtime beyond the native layer's own calls: the entry points
ggml-cann makes (device queries, events with flags and stream waits, the virtual memory
pool, stream capture into model run instances) and the simulated SoC. Each is used as
its hicann/runtime doc describes, and each refusal is shown with its return code.

The entry points are called through runtime.RUNTIME with cffi values, as the simulated
device's own thread (the `dev` fixture made its context current)."""
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from cannops.backend.cann.sim import aclnn, runtime, state  # noqa: E402
from cannops.backend.cann.sim.refusals import SimError  # noqa: E402
from cannops.backend.cann.sim.state import STATE, soc_family  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402

from test_cann_sim import dev  # noqa: E402,F401  (the simulated device fixture)

R = runtime.RUNTIME
INVALID_PARAM = 100000                 # ACL_ERROR_INVALID_PARAM
RT_PARAM_INVALID = 107000              # ACL_ERROR_RT_PARAM_INVALID
INVALID_DEVICEID = 107001              # ACL_ERROR_RT_INVALID_DEVICEID
CONTEXT_NULL = 107002                  # ACL_ERROR_RT_CONTEXT_NULL
INVALID_HANDLE = 107017                # ACL_ERROR_RT_INVALID_HANDLE
STREAM_CAPTURED = 107027               # ACL_ERROR_RT_STREAM_CAPTURED
EVENT_CAPTURED = 107028                # ACL_ERROR_RT_EVENT_CAPTURED
STREAM_NOT_CAPTURED = 107029           # ACL_ERROR_RT_STREAM_NOT_CAPTURED
CAPTURE_MODE_NOT_SUPPORT = 107030      # ACL_ERROR_RT_CAPTURE_MODE_NOT_SUPPORT
MODEL_RUNNING = 107037                 # ACL_ERROR_RT_MODEL_RUNNING
WRONG_THREAD = 107038                  # ACL_ERROR_RT_STREAM_CAPTURE_WRONG_THREAD
FEATURE_NOT_SUPPORT = 207000           # ACL_ERROR_RT_FEATURE_NOT_SUPPORT
MEMORY_ALLOCATION = 207001             # ACL_ERROR_RT_MEMORY_ALLOCATION
CAPTURE_INVALIDATED = 507903           # ACL_ERROR_RT_STREAM_CAPTURE_INVALIDATED
MiB = 1 << 20
GLOBAL, THREAD_LOCAL, RELAXED = 0, 1, 2   # aclmdlRICaptureMode


def ok(name, *args):
    assert R[name](*args) == 0


def refused(code, name, *args, words=""):
    with pytest.raises(SimError) as e:
        R[name](*args)
    assert e.value.code == code, str(e.value)
    assert words in str(e.value)
    return str(e.value)


def addr(ptr) -> int:
    return int(ffi.cast("uintptr_t", ptr))


def in_thread(fn):
    """fn() in a fresh thread (no current context unless fn sets one): its result or error."""
    out = {}

    def body():
        try:
            out["value"] = fn()
        except SimError as e:
            out["error"] = e
        finally:   # a thread id is reused: a later thread must not inherit this context
            STATE.current.pop(threading.get_ident(), None)
    t = threading.Thread(target=body)
    t.start()
    t.join()
    return out


@pytest.fixture
def stream(dev):
    s = ffi.new("aclrtStream *")
    ok("aclrtCreateStream", s)
    yield s[0]
    ok("aclrtSynchronizeStream", s[0])
    ok("aclrtDestroyStream", s[0])


@pytest.fixture
def mem(dev):
    """malloc(n) -> device address; everything freed afterwards."""
    held = []

    def malloc(n):
        p = ffi.new("void **")
        ok("aclrtMalloc", p, n, 0)
        held.append(p[0])
        return p[0]
    yield malloc
    for p in held:
        ok("aclrtFree", p)


def put(dst, values: np.ndarray):
    """Host -> device, synchronously."""
    ok("aclrtMemcpy", dst, values.nbytes, ffi.from_buffer(values), values.nbytes, lib.ACL_MEMCPY_HOST_TO_DEVICE)


def get(src, n: int, dtype=np.float32) -> np.ndarray:
    """The device bytes as they are now (no synchronisation)."""
    return STATE.memory.bytes(addr(src), n * np.dtype(dtype).itemsize, "test").view(dtype).copy()


def copy_async(dst, src, nbytes, s):
    ok("aclrtMemcpyAsync", dst, nbytes, src, nbytes, lib.ACL_MEMCPY_DEVICE_TO_DEVICE, s)


def tensor(ptr, n):
    dims = ffi.new("int64_t[]", [n])
    return R["aclCreateTensor"](dims, 1, lib.ACL_FLOAT, ffi.NULL, 0, lib.ACL_FORMAT_ND, dims, 1, ptr)


def launch_add(x, y, out, n, s):
    """aclnnAdd(x, y, alpha 1, out) on f32[n] device buffers, launched on s."""
    tx, ty, to = tensor(x, n), tensor(y, n), tensor(out, n)
    alpha = R["aclCreateScalar"](ffi.new("float *", 1.0), lib.ACL_FLOAT)
    ws, ex = ffi.new("uint64_t *"), ffi.new("aclOpExecutor **")
    aclnn._prepare("Add", (tx, ty, alpha, to, ws, ex))
    assert ws[0] == 0
    aclnn._launch("Add", ffi.NULL, 0, ex[0], s)
    for t in (tx, ty, to):
        ok("aclDestroyTensor", t)
    ok("aclDestroyScalar", alpha)


# ------------------------------------------------------------------- devices ----

def test_tensor_data_32_byte_aligned(dev, mem, monkeypatch):
    """aclCreateTensor: "tensorData ... 该地址必须32字节对齐" (aolapi operatorlist_00019): a
    view 16 bytes into a buffer is its aligned base plus an offset of 4 f32 elements."""
    p, dims, storage = mem(256), ffi.new("int64_t[]", [4]), ffi.new("int64_t[]", [8])
    args = (dims, 1, lib.ACL_FLOAT, ffi.NULL)
    refused(161002, "aclCreateTensor", *args, 0, lib.ACL_FORMAT_ND, dims, 1,
            ffi.cast("char *", p) + 16, words="is not 32-byte aligned (16 bytes past)")
    ok("aclDestroyTensor", R["aclCreateTensor"](*args, 4, lib.ACL_FORMAT_ND, storage, 1, p))
    monkeypatch.setattr(STATE, "allowed", frozenset({"tensor-data-align"}))
    t = R["aclCreateTensor"](*args, 0, lib.ACL_FORMAT_ND, dims, 1, ffi.cast("char *", p) + 16)
    ok("aclDestroyTensor", t)   # CANN_SIM_ALLOW=tensor-data-align: a foreign client let off


def test_get_device(dev):
    d = ffi.new("int32_t *", -1)
    ok("aclrtGetDevice", d)
    assert d[0] == 0
    err = in_thread(lambda: R["aclrtGetDevice"](ffi.new("int32_t *")))["error"]
    assert err.code == CONTEXT_NULL     # no aclrtSetDevice in that thread


def test_peer_access_one_device(dev):
    can = ffi.new("int32_t *", -1)
    refused(RT_PARAM_INVALID, "aclrtDeviceCanAccessPeer", can, 0, 0, words="must differ")
    refused(INVALID_DEVICEID, "aclrtDeviceCanAccessPeer", can, 0, 1)
    refused(RT_PARAM_INVALID, "aclrtDeviceEnablePeerAccess", 0, 0)
    refused(INVALID_PARAM, "aclrtDeviceEnablePeerAccess", 0, 1, words="must be 0")


def test_peer_access_two_devices(dev, monkeypatch):
    monkeypatch.setattr(state, "DEVICE_COUNT", 2)
    can = ffi.new("int32_t *", -1)
    ok("aclrtDeviceCanAccessPeer", can, 0, 1)
    assert can[0] == 1
    ok("aclrtDeviceEnablePeerAccess", 1, 0)
    ok("aclrtDeviceEnablePeerAccess", 1, 0)     # again, as ggml-cann does per copy
    assert (0, 1) in STATE.peer_access


def test_synchronize_device_runs_every_stream(dev, mem):
    src, a, b = mem(256), mem(256), mem(256)
    x = np.arange(64, dtype=np.float32)
    put(src, x)
    streams = [ffi.new("aclrtStream *") for _ in range(2)]
    for s, dst in zip(streams, (a, b)):
        ok("aclrtCreateStream", s)
        copy_async(dst, src, 256, s[0])
    assert not np.array_equal(get(a, 64), x)     # queued, not run
    ok("aclrtSynchronizeDevice")
    np.testing.assert_array_equal(get(a, 64), x)
    np.testing.assert_array_equal(get(b, 64), x)
    for s in streams:
        ok("aclrtDestroyStream", s[0])


# -------------------------------------------------------------------- events ----

def test_event_flags(dev, stream):
    e = ffi.new("aclrtEvent *")
    refused(INVALID_PARAM, "aclrtCreateEventWithFlag", e, 0x4, words="unknown flag")
    refused(INVALID_PARAM, "aclrtCreateEventWithFlag", e, lib.ACL_EVENT_EXTERNAL | lib.ACL_EVENT_SYNC)
    refused(FEATURE_NOT_SUPPORT, "aclrtCreateEventWithFlag", e, lib.ACL_EVENT_EXTERNAL)
    ok("aclrtCreateEventWithFlag", e, lib.ACL_EVENT_TIME_LINE)
    ok("aclrtRecordEvent", e[0], stream)
    # without ACL_EVENT_SYNC an event cannot be waited for (aclrtCreateEventWithFlag's doc)
    refused(RT_PARAM_INVALID, "aclrtStreamWaitEvent", stream, e[0], words="ACL_EVENT_SYNC")
    ok("aclrtSynchronizeEvent", e[0])
    ms = ffi.new("float *")
    ok("aclrtEventElapsedTime", ms, e[0], e[0])
    ok("aclrtDestroyEvent", e[0])
    ok("aclrtCreateEventWithFlag", e, lib.ACL_EVENT_SYNC)
    ok("aclrtRecordEvent", e[0], stream)
    ok("aclrtSynchronizeEvent", e[0])
    refused(RT_PARAM_INVALID, "aclrtEventElapsedTime", ms, e[0], e[0], words="ACL_EVENT_TIME_LINE")
    ok("aclrtDestroyEvent", e[0])


def test_stream_wait_event_runs_the_other_stream_up_to_the_record(dev, mem, stream):
    a, b, c, d = mem(256), mem(256), mem(256), mem(256)
    x, y = np.arange(64, dtype=np.float32), -np.arange(64, dtype=np.float32)
    put(a, x)
    put(c, y)
    other = ffi.new("aclrtStream *")
    ok("aclrtCreateStream", other)
    e = ffi.new("aclrtEvent *")
    ok("aclrtCreateEventWithFlag", e, lib.ACL_EVENT_SYNC)
    copy_async(b, a, 256, stream)          # b = x
    ok("aclrtRecordEvent", e[0], stream)
    copy_async(b, c, 256, stream)          # b = y, after the record
    ok("aclrtStreamWaitEvent", other[0], e[0])
    copy_async(d, b, 256, other[0])        # d = b as it is at the record
    ok("aclrtSynchronizeStream", other[0])
    np.testing.assert_array_equal(get(d, 64), x)
    np.testing.assert_array_equal(get(b, 64), x)    # the stream ran up to its record only
    ok("aclrtSynchronizeStream", stream)
    np.testing.assert_array_equal(get(b, 64), y)
    ok("aclrtDestroyEvent", e[0])
    ok("aclrtDestroyStream", other[0])


# ------------------------------------------------------------ virtual memory ----

def prop(attr=None, location=None):
    """aclrtPhysicalMemProp as ggml-cann fills it."""
    p = ffi.new("aclrtPhysicalMemProp *")
    p.handleType = lib.ACL_MEM_HANDLE_TYPE_NONE
    p.allocationType = lib.ACL_MEM_ALLOCATION_TYPE_PINNED
    p.memAttr = lib.ACL_HBM_MEM_HUGE if attr is None else attr
    p.location.type = lib.ACL_MEM_LOCATION_TYPE_DEVICE if location is None else location
    p.location.id = 0
    p.reserve = 0
    return p


def test_granularity(dev):
    g = ffi.new("size_t *")
    for option in (lib.ACL_RT_MEM_ALLOC_GRANULARITY_MINIMUM, lib.ACL_RT_MEM_ALLOC_GRANULARITY_RECOMMENDED):
        ok("aclrtMemGetAllocationGranularity", prop(), option, g)
        assert g[0] == 2 * MiB
    ok("aclrtMemGetAllocationGranularity", prop(lib.ACL_HBM_MEM_HUGE1G), 0, g)
    assert g[0] == 1 << 30                  # on the default Ascend910B3
    refused(INVALID_PARAM, "aclrtMemGetAllocationGranularity", prop(lib.ACL_DDR_MEM_HUGE), 0, g)
    refused(FEATURE_NOT_SUPPORT, "aclrtMemGetAllocationGranularity",
            prop(location=lib.ACL_MEM_LOCATION_TYPE_HOST), 0, g)
    refused(INVALID_PARAM, "aclrtMemGetAllocationGranularity", prop(), 7, g)
    refused(INVALID_PARAM, "aclrtMemGetAllocationGranularity", ffi.NULL, 0, g)


def physical(size):
    h = ffi.new("aclrtDrvMemHandle *")
    ok("aclrtMallocPhysical", h, size, prop(), 0)
    return h[0]


def reserve(size):
    v = ffi.new("void **")
    ok("aclrtReserveMemAddress", v, size, 0, ffi.NULL, 1)    # flags 1, as ggml-cann passes
    return v[0]


def test_vmm_pool_as_ggml_cann_grows_it(dev, stream):
    """Reserve once, then map 2 MiB chunks end to end: a buffer across two chunks is
    one range for aclnn operators and copies, as on the device."""
    free0, total = ffi.new("size_t *"), ffi.new("size_t *")
    ok("aclrtGetMemInfo", lib.ACL_HBM_MEM, free0, total)
    base = reserve(64 * MiB)
    assert addr(base) % (2 * MiB) == 0
    handles = [physical(2 * MiB), physical(2 * MiB)]
    free1 = ffi.new("size_t *")
    ok("aclrtGetMemInfo", lib.ACL_HBM_MEM, free1, total)
    assert free0[0] - free1[0] == 4 * MiB          # physical memory is device memory
    for i, h in enumerate(handles):
        ok("aclrtMapMem", ffi.cast("char *", base) + i * 2 * MiB, 2 * MiB, 0, h, 0)
    n = 1024                                        # 4 KiB each, straddling the chunks
    x, y, out = (ffi.cast("char *", base) + 2 * MiB + k * 4096 - 6144 for k in range(3))
    xs, ys = np.linspace(-1, 1, n, dtype=np.float32), np.full(n, 0.5, np.float32)
    put(x, xs)
    put(y, ys)
    launch_add(x, y, out, n, stream)
    ok("aclrtSynchronizeStream", stream)
    np.testing.assert_array_equal(get(out, n), xs + ys)

    # unmapped memory is no device memory any more
    ok("aclrtUnmapMem", ffi.cast("char *", base) + 2 * MiB)
    back = np.zeros(n, np.float32)
    refused(INVALID_PARAM, "aclrtMemcpy", ffi.from_buffer(back), back.nbytes, out, back.nbytes,
            lib.ACL_MEMCPY_DEVICE_TO_HOST, words="not mapped")
    refused(INVALID_PARAM, "aclrtFree", base, words="not an allocation")
    refused(RT_PARAM_INVALID, "aclrtReleaseMemAddress", base, words="aclrtUnmapMem them first")
    ok("aclrtFreePhysical", handles[1])
    # freeing mapped physical memory: the handle dies, the memory goes at the unmap (its doc)
    ok("aclrtFreePhysical", handles[0])
    refused(INVALID_HANDLE, "aclrtFreePhysical", handles[0], words="not a live aclrtDrvMemHandle")
    ok("aclrtGetMemInfo", lib.ACL_HBM_MEM, free1, total)
    assert free0[0] - free1[0] == 2 * MiB
    ok("aclrtUnmapMem", base)
    ok("aclrtGetMemInfo", lib.ACL_HBM_MEM, free1, total)
    assert free1[0] == free0[0]
    ok("aclrtReleaseMemAddress", base)
    again = reserve(64 * MiB)
    assert addr(again) != addr(base)                # addresses are never reused
    ok("aclrtReleaseMemAddress", again)


def test_vmm_refusals(dev):
    v = ffi.new("void **")
    h = ffi.new("aclrtDrvMemHandle *")
    refused(INVALID_PARAM, "aclrtReserveMemAddress", v, 0, 0, ffi.NULL, 0, words="size is 0")
    refused(INVALID_PARAM, "aclrtReserveMemAddress", v, 2 * MiB, 4096, ffi.NULL, 0)
    refused(INVALID_PARAM, "aclrtReserveMemAddress", v, 2 * MiB, 0, ffi.cast("void *", 1 << 44), 0)
    refused(INVALID_PARAM, "aclrtMallocPhysical", h, 2 * MiB, prop(), 1, words="flags")
    refused(MEMORY_ALLOCATION, "aclrtMallocPhysical", h, STATE.memory.capacity + 2 * MiB, prop(), 0)
    base = reserve(8 * MiB)
    p2, p4 = physical(2 * MiB), physical(4 * MiB)
    odd = physical(3 * MiB)                       # taken, but never mappable
    at = ffi.cast("char *", base)
    refused(RT_PARAM_INVALID, "aclrtMapMem", base, 4 * MiB, 0, p2, 0, words="physical memory's")
    refused(RT_PARAM_INVALID, "aclrtMapMem", base, 3 * MiB, 0, odd, 0, words="granularity")
    refused(INVALID_PARAM, "aclrtMapMem", base, 2 * MiB, 4096, p2, 0)
    refused(RT_PARAM_INVALID, "aclrtMapMem", at + 4096, 2 * MiB, 0, p2, 0, words="aligned")
    refused(RT_PARAM_INVALID, "aclrtMapMem", at + 6 * MiB, 4 * MiB, 0, p4, 0, words="past the reservation")
    ok("aclrtMapMem", at + 2 * MiB, 4 * MiB, 0, p4, 0)
    refused(RT_PARAM_INVALID, "aclrtMapMem", at + 4 * MiB, 2 * MiB, 0, p2, 0, words="overlaps")
    refused(RT_PARAM_INVALID, "aclrtUnmapMem", at + 4 * MiB, words="no mapping starts")
    refused(RT_PARAM_INVALID, "aclrtReleaseMemAddress", at + 2 * MiB, words="not its start")
    ok("aclrtUnmapMem", at + 2 * MiB)
    for p in (p2, p4, odd):
        ok("aclrtFreePhysical", p)
    refused(INVALID_HANDLE, "aclrtMapMem", base, 2 * MiB, 0, p2, 0)
    ok("aclrtReleaseMemAddress", base)
    refused(RT_PARAM_INVALID, "aclrtReleaseMemAddress", base, words="not in memory reserved")


# ------------------------------------------------------------------- capture ----

def capture_end(s):
    m = ffi.new("aclmdlRI *")
    ok("aclmdlRICaptureEnd", s, m)
    return m[0]


def test_capture_records_and_replays(dev, mem, stream):
    n = 64
    x, y, out, copy = mem(4 * n), mem(4 * n), mem(4 * n), mem(4 * n)
    xs, ys = np.arange(n, dtype=np.float32), np.ones(n, np.float32)
    put(x, xs)
    put(y, ys)
    put(out, np.zeros(n, np.float32))
    ok("aclmdlRICaptureBegin", stream, GLOBAL)
    launch_add(x, y, out, n, stream)
    copy_async(copy, out, 4 * n, stream)
    scratch = ffi.new("void **")
    ok("aclrtMalloc", scratch, 256, 0)          # allocation is allowed in a capture
    model = capture_end(stream)
    ok("aclrtSynchronizeStream", stream)
    np.testing.assert_array_equal(get(out, n), 0)   # recorded, not run
    ok("aclmdlRIExecuteAsync", model, stream)
    ok("aclmdlRIExecuteAsync", model, stream)
    refused(MODEL_RUNNING, "aclmdlRIDestroy", model)
    ok("aclrtSynchronizeStream", stream)
    np.testing.assert_array_equal(get(copy, n), xs + ys)
    put(x, 2 * xs)                              # a replay reads memory as it is then
    ok("aclmdlRIExecuteAsync", model, stream)
    ok("aclrtSynchronizeStream", stream)
    np.testing.assert_array_equal(get(copy, n), 2 * xs + ys)
    ok("aclmdlRIDestroy", model)
    refused(INVALID_HANDLE, "aclmdlRIExecuteAsync", model, stream)
    ok("aclrtFree", scratch[0])


@pytest.mark.parametrize("call, code", [
    (lambda s, b: R["aclrtSynchronizeStream"](s), STREAM_CAPTURED),
    (lambda s, b: R["aclrtSynchronizeDevice"](), STREAM_CAPTURED),
    (lambda s, b: R["aclrtMemcpy"](b, 256, b + 256, 256, lib.ACL_MEMCPY_DEVICE_TO_DEVICE),
     CAPTURE_MODE_NOT_SUPPORT),
    (lambda s, b: R["aclrtMemset"](b, 256, 0, 256), CAPTURE_MODE_NOT_SUPPORT),
])
def test_capture_refuses_and_fails(dev, mem, stream, call, code):
    """What the device refuses during a capture (dev_guide 04-01) fails the capture."""
    b = ffi.cast("char *", mem(512))
    ok("aclmdlRICaptureBegin", stream, GLOBAL)
    with pytest.raises(SimError) as e:
        call(stream, b)
    assert e.value.code == code
    refused(CAPTURE_INVALIDATED, "aclmdlRICaptureEnd", stream, ffi.new("aclmdlRI *"),
            words="the capture failed")
    refused(STREAM_NOT_CAPTURED, "aclmdlRICaptureEnd", stream, ffi.new("aclmdlRI *"))


def test_capture_event_and_stream_rules(dev, stream):
    e = ffi.new("aclrtEvent *")
    ok("aclrtCreateEvent", e)
    ok("aclmdlRICaptureBegin", stream, GLOBAL)
    refused(STREAM_CAPTURED, "aclmdlRICaptureBegin", stream, GLOBAL)
    refused(STREAM_CAPTURED, "aclrtDestroyStream", stream)
    ok("aclrtRecordEvent", e[0], stream)
    refused(EVENT_CAPTURED, "aclrtSynchronizeEvent", e[0])
    err = in_thread(lambda: R["aclmdlRICaptureEnd"](stream, ffi.new("aclmdlRI *")))["error"]
    assert err.code == WRONG_THREAD
    refused(CAPTURE_INVALIDATED, "aclmdlRICaptureEnd", stream, ffi.new("aclmdlRI *"))
    refused(INVALID_PARAM, "aclmdlRICaptureBegin", stream, 3)
    ok("aclrtDestroyEvent", e[0])


def test_capture_modes(dev, mem, stream):
    """RELAXED allows aclrtMemcpy; THREAD_LOCAL forbids it to the capturing thread only."""
    b = ffi.cast("char *", mem(512))
    ctx = ffi.new("aclrtContext *")
    ok("aclrtGetCurrentContext", ctx)

    def other_thread_memset():
        R["aclrtSetCurrentContext"](ctx[0])
        return R["aclrtMemset"](b, 256, 0, 256)
    ok("aclmdlRICaptureBegin", stream, RELAXED)
    ok("aclrtMemset", b, 256, 0, 256)
    ok("aclmdlRIDestroy", capture_end(stream))
    ok("aclmdlRICaptureBegin", stream, THREAD_LOCAL)
    assert in_thread(other_thread_memset) == {"value": 0}
    refused(CAPTURE_MODE_NOT_SUPPORT, "aclrtMemset", b, 256, 0, 256)
    refused(CAPTURE_INVALIDATED, "aclmdlRICaptureEnd", stream, ffi.new("aclmdlRI *"))


# ------------------------------------------------------------- leaks and SoC ----

def _child(body: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os
    code = textwrap.dedent("""
        from cannops.backend import cann
        from cannops.backend.cann.sim.refusals import SimError
        from cannops.backend.cann.sim.runtime import RUNTIME as R
        from cannops.backend.cann.sim.state import soc_family
        from cannops.native._aclnn import ffi, lib
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


def test_vmm_and_model_leaks_reported(dev):
    leaky = _child("""
        dev = cann.open_device(cann.SIM_NAME)
        v, h = ffi.new("void **"), ffi.new("aclrtDrvMemHandle *")
        p = ffi.new("aclrtPhysicalMemProp *")
        p.memAttr, p.location.type = lib.ACL_HBM_MEM_HUGE, lib.ACL_MEM_LOCATION_TYPE_DEVICE
        assert R["aclrtReserveMemAddress"](v, 4 << 20, 0, ffi.NULL, 0) == 0
        assert R["aclrtMallocPhysical"](h, 2 << 20, p, 0) == 0
        s, m = ffi.new("aclrtStream *"), ffi.new("aclmdlRI *")
        assert R["aclrtCreateStream"](s) == 0
        assert R["aclmdlRICaptureBegin"](s[0], 0) == 0
        assert R["aclmdlRICaptureEnd"](s[0], m) == 0
        assert R["aclrtDestroyStream"](s[0]) == 0
    """)
    assert leaky.returncode == 0, leaky.stderr
    for words in ("1 aclrtReserveMemAddress range(s), 4194304 bytes, never released",
                  "1 aclrtMallocPhysical handle(s), 2097152 bytes, never freed",
                  "1 aclmdlRI(s) never destroyed"):
        assert words in leaky.stderr


def test_soc_from_environment(dev):
    assert STATE.soc == "Ascend910B3" and soc_family() == "910B"
    p310 = _child("""
        dev = cann.open_device(cann.SIM_NAME)
        print(ffi.string(R["aclrtGetSocName"]()).decode(), soc_family())
        p = ffi.new("aclrtPhysicalMemProp *")
        p.memAttr, p.location.type = lib.ACL_HBM_MEM_HUGE1G, lib.ACL_MEM_LOCATION_TYPE_DEVICE
        try:
            R["aclrtMemGetAllocationGranularity"](p, 0, ffi.new("size_t *"))
        except SimError as e:
            print(e.code)
    """, {"CANN_SIM_SOC": "Ascend310P3"})
    assert p310.returncode == 0, p310.stderr
    assert p310.stdout.split() == ["Ascend310P3", "310P", str(FEATURE_NOT_SUPPORT)]
    unknown = _child("""
        try:
            R["aclInit"](ffi.NULL)
        except SimError as e:
            print(e.code, e)
    """, {"CANN_SIM_SOC": "Ascend999"})
    assert unknown.returncode == 0, unknown.stderr
    assert unknown.stdout.startswith(f"{INVALID_PARAM} aclInit: CANN_SIM_SOC='Ascend999' is not a simulated SoC")


@pytest.mark.parametrize("text", ["96", "0", str(1 << 62), str(1 << 30)])
def test_a_malloc_alignment_past_its_range_is_refused_at_init(monkeypatch, text):
    """CANN_SIM_MALLOC_ALIGN=2^62 (a power of two) was taken: every aclrtMalloc then failed
    inside numpy, a traceback per case (found by bench/probe43.py)."""
    monkeypatch.setenv("CANN_SIM_MALLOC_ALIGN", text)
    with pytest.raises(SimError, match="CANN_SIM_MALLOC_ALIGN"):
        state.align_from_env()


def test_a_malloc_alignment_in_range_is_taken(monkeypatch):
    monkeypatch.setenv("CANN_SIM_MALLOC_ALIGN", "128")
    assert state.align_from_env() == 128
