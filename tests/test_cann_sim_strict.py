"""The CANN simulator is as strict as the hardware's documented rules: each rule is shown
refusing a misuse with the ACL / aclnn return code the real runtime gives (or, where
the docs name none, the closest code of acl/error_codes/rt_error_codes.h).

Misuses are played by test-only entry points of the native layer (native/aclnn/testing.c)
through the same function table the op handlers use; type rules are checked on the
simulator's tables and on an aclnn operator called as the layer would."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from cannops.backend.cann.sim import dtypes  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402

PARAM_INVALID = 161002                 # ACLNN_ERR_PARAM_INVALID
CONTEXT_NULL = 107002                  # ACL_ERROR_RT_CONTEXT_NULL
ADDR_UNALIGNED = 107008                # ACL_ERROR_RT_ADDR_UNALIGNED
FEATURE_NOT_SUPPORT = 207000           # ACL_ERROR_RT_FEATURE_NOT_SUPPORT
MEMORY_ALLOCATION = 207001             # ACL_ERROR_RT_MEMORY_ALLOCATION

from test_cann_sim import call, dev  # noqa: E402,F401  (the simulated device fixture, one C call)


def acl(name: str) -> int:
    return dtypes.BY_NAME[name]


# ---------------------------------------------------------------- dtype rules ----

@pytest.mark.parametrize("src, dst, ok", [
    ("f32", "s32", False), ("f16", "s8", False), ("bf16", "u8", False),   # float -> integral
    ("c64", "f32", False), ("c128", "s64", False),                       # complex -> real
    ("f32", "bool", False), ("s32", "bool", False),                      # only bool -> bool
    ("s32", "f32", True), ("f32", "f16", True), ("bool", "s32", True),
    ("bool", "f16", True), ("f32", "c64", True), ("s64", "s8", True),
])
def test_can_cast(src, dst, ok):
    assert dtypes.can_cast(acl(src), acl(dst)) is ok


@pytest.mark.parametrize("a, b, result", [
    ("f16", "bf16", "f32"), ("s8", "u8", "s16"), ("bool", "u8", "u8"), ("s32", "f16", "f16"),
    ("bf16", "s64", "bf16"), ("u16", "s32", None), ("bf16", "c64", "c64"),
    ("u16", "c64", "c64"), ("c64", "u16", None),     # opbase's table is not symmetric there
])
def test_promote_table(a, b, result):
    assert dtypes.promote(acl(a), acl(b)) == (acl(result) if result else None)


def test_float_alpha_on_int_add_is_refused(dev):
    """aclnnAdd: alpha must convert to the promoted type, and FLOAT -> INT32 does not
    (the GET_ROWS slice sum of issue 10): the simulator refuses as the hardware does."""
    from cannops.backend.cann.sim.aclnn import OPS
    from cannops.backend.cann.sim.refusals import SimError
    from cannops.backend.cann.sim.runtime import RUNTIME
    p = lib.ops_cann_alloc(dev.ctx, 64, ffi.new("char[]", 64), 64)
    dims = ffi.new("int64_t[]", [4])
    x = RUNTIME["aclCreateTensor"](dims, 1, lib.ACL_INT32, ffi.NULL, 0, lib.ACL_FORMAT_ND, dims, 1, p)
    f_alpha = RUNTIME["aclCreateScalar"](ffi.new("float *", 1.0), lib.ACL_FLOAT)
    i_alpha = RUNTIME["aclCreateScalar"](ffi.new("int32_t *", 1), lib.ACL_INT32)
    try:
        with pytest.raises(SimError) as e:
            OPS["Add"](x, x, f_alpha, x)
        assert e.value.code == PARAM_INVALID
        assert "FLOAT cannot be converted to INT32" in str(e.value)
        OPS["Add"](x, x, i_alpha, x)    # an INT32 alpha is fine
    finally:
        RUNTIME["aclDestroyTensor"](x)
        RUNTIME["aclDestroyScalar"](f_alpha)
        RUNTIME["aclDestroyScalar"](i_alpha)
        lib.ops_cann_release(dev.ctx, p)


# -------------------------------------------------------- copies and memory ----

@pytest.mark.parametrize("how, code, words", [
    (lib.OPS_TEST_COPY_ALIGNED_D2D, 0, ""),
    (lib.OPS_TEST_COPY_UNALIGNED_D2D, ADDR_UNALIGNED, "not 64-byte aligned"),
    (lib.OPS_TEST_COPY_PAGEABLE_H2D, 0, ""),          # taken: copied before the call returns
    (lib.OPS_TEST_COPY_PINNED_H2D, 0, ""),
    (lib.OPS_TEST_COPY_H2H, FEATURE_NOT_SUPPORT, "HOST_TO_HOST"),
])
def test_async_copy_rules(dev, how, code, words):
    rc, msg = call(lib.ops_cann_test_async_copy, dev.ctx, how)
    assert rc == code, msg
    assert words in msg


def test_pageable_async_copy_is_done_when_the_call_returns(dev):
    """aclrtMemcpyAsync from malloc'd host memory returns once the copy ran (the current
    aclrtMemcpyAsync page), after the work queued before it; the default (NULL) stream
    is a stream like the others."""
    from cannops.backend.cann.sim.runtime import RUNTIME
    err = ffi.new("char[]", 256)
    p = lib.ops_cann_alloc(dev.ctx, 64, err, 256)
    host = ffi.new("float[16]", list(range(16)))
    out = ffi.new("float[16]")
    try:
        for stream in (dev_stream(dev), ffi.NULL):
            assert RUNTIME["aclrtMemset"](p, 64, 0, 64) == 0
            assert RUNTIME["aclrtMemcpyAsync"](p, 64, host, 64, lib.ACL_MEMCPY_HOST_TO_DEVICE, stream) == 0
            host[3] = -1.0                      # too late: the copy is done
            assert RUNTIME["aclrtMemcpy"](out, 64, p, 64, lib.ACL_MEMCPY_DEVICE_TO_HOST) == 0
            assert list(out)[:5] == [0, 1, 2, 3, 4]
            host[3] = 3.0
    finally:
        lib.ops_cann_release(dev.ctx, p)


def dev_stream(dev):
    from cannops.backend.cann.sim.state import STATE
    return ffi.cast("void *", next(iter(STATE.streams.objects)))


def test_device_addresses_are_64_but_not_128_aligned(dev):
    from cannops.backend.cann.sim.state import STATE
    err = ffi.new("char[]", 256)
    blocks = [lib.ops_cann_alloc(dev.ctx, 1000 + 64 * i, err, 256) for i in range(4)]
    try:
        for p in blocks:
            addr = int(ffi.cast("uintptr_t", p))
            assert addr % 64 == 0 and addr % 128 == 64
            assert STATE.memory.find(addr, 1) is not None
    finally:
        for p in blocks:
            lib.ops_cann_release(dev.ctx, p)


# ----------------------------------------------------- per-thread context ----

def test_thread_without_current_context_is_refused(dev):
    rc, msg = call(lib.ops_cann_test_thread_context, dev.ctx, 0)
    assert rc == CONTEXT_NULL, msg
    assert "aclrtCreateStream" in msg and "no current context" in msg
    rc, msg = call(lib.ops_cann_test_thread_context, dev.ctx, 1)
    assert rc == 0, msg


def test_layer_entry_points_work_from_any_thread(dev):
    """The layer makes its context current in whichever thread calls it."""
    import threading
    from cannops.cases.graph import Graph, unary
    g = Graph()
    a = g.new_tensor("f32", [8], "a")
    g.out = unary(a, "ABS")
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    got = {}
    t = threading.Thread(target=lambda: got.update(out=dev.run(None, g, {a.index: x}, [g.out.index])))
    t.start()
    t.join()
    np.testing.assert_array_equal(got["out"].outputs[g.out.index].ravel(), np.abs(x))


# ------------------------------------------------- executors and workspace ----

def _run_child(body: str) -> subprocess.CompletedProcess:
    code = textwrap.dedent("""
        from cannops.backend import cann
        from cannops.native._aclnn import ffi, lib
        assert cann.runtime().simulated
        dev = cann.open_device(cann.SIM_NAME)
        err = ffi.new("char[]", 2048)
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_forgotten_executor_is_a_leak_at_device_close():
    child = _run_child("""
        assert lib.ops_cann_test_executor_dropped(dev.ctx, err, 2048) == 0
        dev.close()
        print("closed")
    """)
    assert child.returncode == 0, child.stderr
    out = child.stderr.split("closed")[0] if "closed" in child.stderr else child.stderr
    assert ("CANN-SIM: leak at aclrtResetDevice(0): 1 aclOpExecutor(s) neither launched "
            "nor destroyed") in out


def test_workspace_failure_releases_the_executor():
    """The layer's launch path: the workspace cannot be had, the call fails with the
    allocation's code, and its executor is released (no leak at device close)."""
    child = _run_child("""
        rc = lib.ops_cann_test_workspace_failure(dev.ctx, err, 2048)
        print("rc", rc, ffi.string(err).decode())
        dev.close()
    """)
    assert child.returncode == 0, child.stderr
    assert f"rc {MEMORY_ALLOCATION} aclrtMalloc(" in child.stdout
    assert "leak" not in child.stderr


def test_leaked_memory_is_reported_at_device_close():
    child = _run_child("""
        assert lib.ops_cann_test_leak(dev.ctx, 4096, err, 2048) == 0
        dev.close()
    """)
    assert child.returncode == 0, child.stderr
    assert "CANN-SIM: leak at aclrtResetDevice(0): 1 device allocation(s), 4096 bytes" in child.stderr
    assert "leak at aclFinalize" not in child.stderr     # each leak is reported once


# ------------------------------------------------ per-operator dtype audit ----
# docs/cann-sim-dtypes.md: each operator the audit changed, called as its A2 page refuses
# (ACLNN_ERR_PARAM_INVALID) and as it allows; a spec is a tensor T, a scalar S, an int
# array A, None (nullptr) or a plain value.

def T(dtype, *shape, fmt=None):
    return ("tensor", dtype, shape, fmt)


def S(dtype, value):
    return ("scalar", dtype, value)


def A(*values):
    return ("array", values)


def L(*tensors):
    return ("list", tensors)


def call_op(dev, name, *specs) -> int:
    """The simulated aclnn<name>GetWorkspaceSize checks on descriptors made from specs:
    0 where they pass, else the SimError code."""
    from cannops.backend.cann.sim.aclnn import OPS
    from cannops.backend.cann.sim.refusals import SimError
    from cannops.backend.cann.sim.runtime import RUNTIME
    made, blocks, buffers = [], [], []

    def build(spec):
        if spec is None:
            return ffi.NULL
        if not isinstance(spec, tuple):
            return spec
        if spec[0] == "tensor":
            _, dt, shape, fmt = spec
            nbytes = max(64, int(np.prod(shape)) * dtypes.numpy_dtype(acl(dt)).itemsize)
            p = lib.ops_cann_alloc(dev.ctx, nbytes, ffi.new("char[]", 64), 64)
            blocks.append(p)
            dims = ffi.new("int64_t[]", list(shape) or [1])
            obj = RUNTIME["aclCreateTensor"](dims, len(shape), acl(dt), ffi.NULL, 0,
                                             lib.ACL_FORMAT_ND if fmt is None else fmt, dims, len(shape), p)
            made.append(("aclDestroyTensor", obj))
        elif spec[0] == "list":   # the list owns its tensors: destroyed with it, not apart
            n = len(made)
            items = [build(s) for s in spec[1]]
            del made[n:]
            obj = RUNTIME["aclCreateTensorList"](ffi.new("aclTensor *[]", items), len(items))
            made.append(("aclDestroyTensorList", obj))
        elif spec[0] == "scalar":
            value = np.array([spec[2]], dtypes.numpy_dtype(acl(spec[1])))
            buffers.append(value)
            obj = RUNTIME["aclCreateScalar"](ffi.from_buffer(value), acl(spec[1]))
            made.append(("aclDestroyScalar", obj))
        else:
            obj = RUNTIME["aclCreateIntArray"](ffi.new("int64_t[]", list(spec[1])), len(spec[1]))
            made.append(("aclDestroyIntArray", obj))
        return obj

    try:
        OPS[name](*[build(s) for s in specs])
        return 0
    except SimError as e:
        return e.code
    finally:
        for destroy, obj in made:
            RUNTIME[destroy](obj)
        for p in blocks:
            lib.ops_cann_release(dev.ctx, p)


NCL = lib.ACL_FORMAT_NCL
AUDITED = [   # (operator, arguments, expected code): the table's "rejects" column, then a call it takes
    # a FLOAT out of FLOAT16 operands: the page wants the deduced type, ops-nn's A2 check
    # (and ggml-cann on 910B) takes it; a BFLOAT16 out of FLOAT operands converts from none
    ("Mm", (T("f16", 2, 3), T("f16", 3, 4), T("f32", 2, 4), 0), 0),
    ("Mm", (T("f32", 2, 3), T("f32", 3, 4), T("bool", 2, 4), 0), PARAM_INVALID),
    ("Convolution", (T("f32", 1, 2, 5, fmt=NCL), T("f16", 3, 2, 2, fmt=NCL), None, A(1), A(0), A(1), False,
                     A(0), 1, T("f16", 1, 3, 4, fmt=NCL), 0), PARAM_INVALID),
    ("Convolution", (T("f32", 1, 2, 5, fmt=NCL), T("f16", 3, 2, 2, fmt=NCL), None, A(1), A(0), A(1), False,
                     A(0), 1, T("f32", 1, 3, 4, fmt=NCL), 0), 0),
    ("LayerNorm", (T("f32", 2, 4), A(4), None, None, 1e-5, T("f32", 2, 4), T("f16", 2, 1), None), PARAM_INVALID),
    ("LayerNorm", (T("f32", 2, 4), A(4), None, None, 1e-5, T("f32", 2, 4), T("f32", 2, 1), None), 0),
    ("Cumsum", (T("bool", 4), 0, acl("s64"), T("s64", 4)), PARAM_INVALID),
    ("Cumsum", (T("s32", 4), 0, acl("s64"), T("s64", 4)), 0),
    ("InplaceThreshold", (T("f64", 4), S("f32", 0.0), S("f32", 0.0)), PARAM_INVALID),
    ("InplaceThreshold", (T("f32", 4), S("f32", 0.0), S("f32", 0.0)), 0),
    ("InplaceClampMax", (T("s32", 4), S("f32", 1.5)), PARAM_INVALID),
    ("InplaceClampMax", (T("s32", 4), S("s32", 1)), 0),
    ("Clamp", (T("s32", 4), S("f32", -1.5), S("s32", 1), T("s32", 4)), PARAM_INVALID),
    ("Clamp", (T("s32", 4), S("s32", -1), S("s32", 1), T("s32", 4)), 0),
    ("ClampMin", (T("f32", 4), S("f32", 0.0), T("s32", 4)), PARAM_INVALID),
    ("ClampMin", (T("f16", 4), S("f32", 0.0), T("f32", 4)), 0),
    ("LeakyRelu", (T("f64", 4), S("f32", 0.1), T("f64", 4)), PARAM_INVALID),
    ("LeakyRelu", (T("f16", 4), S("f32", 0.1), T("f32", 4)), 0),
    ("Softplus", (T("f32", 4), S("c64", 1.0), S("f32", 20.0), T("f32", 4)), PARAM_INVALID),
    ("Softplus", (T("f32", 4), S("f64", 1.0), S("f32", 20.0), T("f32", 4)), 0),
    ("Norm", (T("f32", 2, 4), S("s32", 2), A(1), True, T("f32", 2, 1)), PARAM_INVALID),
    ("Norm", (T("f32", 2, 4), S("f32", 2.0), A(1), True, T("f32", 2, 1)), 0),
    ("InplaceCopy", (T("s32", 4), T("s4", 4)), PARAM_INVALID),
    ("InplaceCopy", (T("s32", 4), T("f32", 4)), 0),
    ("Abs", (T("c64", 4), T("c64", 4)), PARAM_INVALID),
    ("Abs", (T("c64", 4), T("f32", 4)), 0),
    ("IndexSelect", (T("s4", 4, 2), 0, T("s32", 2), T("s4", 2, 2)), PARAM_INVALID),
    ("IndexSelect", (T("u16", 4, 2), 0, T("s32", 2), T("u16", 2, 2)), 0),
    ("InplaceAdds", (T("c64", 4), S("f32", 1.0), S("f32", 1.0)), PARAM_INVALID),
    ("InplaceAdds", (T("f32", 4), S("f32", 1.0), S("f32", 1.0)), 0),
    ("PowScalarTensor", (S("f32", 2.0), T("bool", 4), T("f32", 4)), PARAM_INVALID),
    ("PowScalarTensor", (S("f32", 2.0), T("bf16", 4), T("bf16", 4)), 0),
]


@pytest.mark.parametrize("op, args, code", AUDITED,
                         ids=[f"{op}-{'refused' if code else 'taken'}" for op, _, code in AUDITED])
def test_audited_operator_dtypes(dev, op, args, code):
    assert call_op(dev, op, *args) == code
