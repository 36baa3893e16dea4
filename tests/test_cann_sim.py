"""The CANN simulator catches each strictness rule, and aclnn errors become DeviceErrors.

Each rule is shown by a deliberately broken call sequence played by a test-only entry
point of the native layer (native/aclnn/testing.c), through the same function table
the op handlers use."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from cannops.backend.base import DeviceError  # noqa: E402
from cannops.cases.graph import Graph, unary  # noqa: E402
from cannops.native._aclnn import ffi, lib  # noqa: E402

INVALID, NULLPTR = 161002, 161001


@pytest.fixture(scope="module")
def dev():
    if not cann.runtime().simulated:
        pytest.skip("a real CANN device is present: the simulator is not in use")
    d = cann.open_device(cann.SIM_NAME)
    yield d
    d.close()


def call(fn, *args):
    err = ffi.new("char[]", 2048)
    rc = fn(*args, err, len(err))
    return rc, ffi.string(err).decode()


def test_missing_sync_reads_stale_data(dev):
    x = np.linspace(-1, 1, 64, dtype=np.float32)
    before, after = np.full(64, 7, np.float32), np.full(64, 7, np.float32)
    rc, msg = call(lib.ops_cann_test_missing_sync, dev.ctx, ffi.from_buffer("float[]", x), 64,
                   ffi.from_buffer("float[]", before), ffi.from_buffer("float[]", after))
    assert rc == 0, msg
    assert np.all(before == 0)            # the output as it was before the launch
    np.testing.assert_array_equal(after, 2 * x)


def test_freed_memory_is_poisoned(dev):
    data = np.arange(256, dtype=np.uint8)
    back = np.zeros(256, np.uint8)
    rc, msg = call(lib.ops_cann_test_use_after_free, dev.ctx, ffi.from_buffer(data), 256,
                   ffi.from_buffer(back))
    assert rc == 0, msg
    assert np.all(back == 0xFF)
    assert np.isnan(back.view(np.float32)).all()


def test_view_outside_storage_is_rejected(dev):
    rc, msg = call(lib.ops_cann_test_view_outside_storage, dev.ctx)
    assert rc == INVALID
    assert "outside the storage" in msg


def test_executor_is_single_use(dev):
    rc, msg = call(lib.ops_cann_test_executor_reuse, dev.ctx)
    assert rc == INVALID
    assert "already launched" in msg


def test_short_workspace_is_rejected(dev):
    rc, msg = call(lib.ops_cann_test_short_workspace, dev.ctx)
    assert rc == INVALID
    assert "smaller than" in msg


def _run_child(body: str) -> subprocess.CompletedProcess:
    code = textwrap.dedent("""
        from cannops.backend import cann
        from cannops.native._aclnn import ffi, lib
        assert cann.runtime().simulated
        dev = cann.open_device(cann.SIM_NAME)
    """) + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_leak_reported_at_exit(dev):
    leaky = _run_child("""
        err = ffi.new("char[]", 256)
        assert lib.ops_cann_test_leak(dev.ctx, 4096, err, 256) == 0
    """)
    assert leaky.returncode == 0, leaky.stderr   # the device is closed at exit
    assert "CANN-SIM: leak at aclrtResetDevice(0): 1 device allocation(s), 4096 bytes" in leaky.stderr
    clean = _run_child("""
        from cannops.cases.catalog import all_cases
        case = next(c for c in all_cases() if c.op == "SILU")
        g = case.build()
        dev.run(case, g, case.init_inputs(g, 0), [g.out.index])
    """)
    assert clean.returncode == 0, clean.stderr
    assert "leak" not in clean.stderr


def test_aclnn_error_becomes_device_error(dev):
    # aclnnSilu takes FLOAT16 / FLOAT / BFLOAT16 only: the rules refuse the node, and
    # running it anyway fails with the aclnn code and the simulator's message
    g = Graph()
    a = g.new_tensor("i32", [8, 2], "a")
    g.out = unary(a, "SILU")
    assert not dev.supports(None, g)
    with pytest.raises(DeviceError) as e:
        dev.run(None, g, {a.index: np.arange(16, dtype=np.int32).reshape(2, 8)}, [g.out.index])
    assert e.value.code == INVALID
    assert "161002" in str(e.value)
    assert "aclnnSiluGetWorkspaceSize" in str(e.value) and "INT32" in str(e.value)
    # the device is still usable afterwards
    g = Graph()
    b = g.new_tensor("f32", [8], "b")
    g.out = unary(b, "ABS")
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    out = dev.run(None, g, {b.index: x}, [g.out.index])
    np.testing.assert_array_equal(out.outputs[g.out.index].ravel(), np.abs(x))


def test_sim_device_naming():
    if not cann.runtime().simulated:
        pytest.skip("a real CANN device is present")
    devices = dict(cann.list_devices())
    assert list(devices) == [cann.SIM_NAME]
    assert "simulator" in devices[cann.SIM_NAME]
    with pytest.raises(KeyError):
        cann.open_device("CANN0")
