"""The call trace and the blame (issue 33, parts 1 and 2): CANN-SIM records each ACL /
aclnn call of a case; a FAIL is replayed call by call in float64 and the first call out of
tolerance is named; a planted wrong call (OPS_CANN_FAULT) is named as that call."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

cann = pytest.importorskip("cannops.backend.cann")
from cannops.backend import trace  # noqa: E402
from cannops.cases.catalog import all_cases  # noqa: E402
from cannops.cli.engine import CaseResult  # noqa: E402
from cannops.cli.engine.execute import CaseOptions, test as run_test  # noqa: E402

SOFT_MAX = ("SOFT_MAX(type=f32,ne=[16,16,1,1],mask=1,sinks=0,m_prec=f32,nr23=[1,1],"
            "scale=1.000000,max_bias=0.000000,inplace=0)")


@pytest.fixture(scope="module")
def case():
    return next(c for c in all_cases() if c.name == SOFT_MAX)


@pytest.fixture
def sim(dev):
    if not dev.can_trace:
        pytest.skip(f"{dev.name} does not trace its calls")
    return dev


def test_a_passing_case_records_no_trace_unless_asked(sim, case):
    r = run_test(sim, case)
    assert r.status == "OK" and r.trace == [] and r.blame == ""
    r = run_test(sim, case, CaseOptions(trace=True))
    assert r.status == "OK" and r.blame == ""
    assert [c["call"] for c in r.trace] == ["aclnnMuls", "aclnnInplaceAdd", "aclnnSoftmax"]
    muls = r.trace[0]
    assert muls["args"]["self"]["dtype"] == "FLOAT" and muls["args"]["self"]["ne"] == [1, 1, 16, 16]
    assert muls["args"]["other"] == {"scalar": 1.0, "dtype": "FLOAT"}
    assert muls["rc"] == 0 and muls["workspace"] == 0 and muls["stream"].startswith("0x")
    assert r.trace[2]["args"]["dim"] == 3
    # the trace is a declared field of the results file, and reads back
    d = json.loads(json.dumps(r.to_dict()))
    assert CaseResult.from_dict(d).trace == r.trace


def test_the_planted_wrong_call_is_blamed(sim, case, monkeypatch):
    """softmax-bf16-logits: the aclnnMuls that writes the scaled logits writes BF16. The
    case FAILs; the replay names that aclnnMuls, not the aclnnSoftmax that shows it."""
    monkeypatch.setenv("OPS_CANN_FAULT", "softmax-bf16-logits")
    r = run_test(sim, case)
    assert r.status == "FAIL", r.reason
    assert r.trace[0]["args"]["out"]["dtype"] == "BFLOAT16"
    assert r.blame.startswith("aclnnMuls (call 1 of 3, before aclnnSoftmax) out of tolerance (own NMSE")
    blamed, _ = trace.blame(r.trace, r.threshold, r.error)
    assert blamed == 0
    # the softmax itself, on the logits it was given, is right to f64 rounding
    assert r.trace[2]["own_nmse"] < 1e-12
    lines = trace.compact(r.trace, blamed)
    assert lines[0].startswith("> #1 aclnnMuls(self=FLOAT[1,1,16,16], other=1, out=BFLOAT16[1,1,16,16])")


def test_a_refused_call_is_traced_and_blamed_though_the_run_was_not_traced(sim, case, monkeypatch):
    """softmax-bad-dim: aclnnSoftmax is given dim 4 of a 4-dim tensor. The run raises; it
    is run again traced, and the blame is the refused call with the simulator's rule."""
    monkeypatch.setenv("OPS_CANN_FAULT", "softmax-bad-dim")
    r = run_test(sim, case)
    assert r.status == "FAIL" and "aclnnSoftmaxGetWorkspaceSize" in r.reason
    assert [c["call"] for c in r.trace] == ["aclnnMuls", "aclnnInplaceAdd", "aclnnSoftmax"]
    assert r.trace[2]["args"]["dim"] == 4 and r.trace[2]["rc"] != 0
    assert r.blame == f"aclnnSoftmax (call 3 of 3) returned {r.trace[2]['rc']}"
    assert r.trace[2]["error"].startswith("aclnnSoftmaxGetWorkspaceSize: provided dim 4 not in the range")


def test_exact_mode_is_float64_and_off_outside_the_replay(sim, case):
    from cannops.backend.cann.sim import dtypes
    from cannops.native._aclnn import lib
    assert not dtypes.EXACT and dtypes.compute_dtype(lib.ACL_FLOAT16) == np.float32
    with dtypes.exact():
        assert dtypes.compute_dtype(lib.ACL_FLOAT16) == np.float64
    assert not dtypes.EXACT


def test_a_refused_call_is_the_blame_of_a_device_error():
    calls = [{"call": "aclnnMuls", "args": {}, "rc": 0},
             {"call": "aclnnSoftmax", "args": {}, "rc": 161002,
              "error": "aclnnSoftmaxGetWorkspaceSize: self dtype INT32 should be in [...]"}]
    i, phrase = trace.blame(calls, None, None)
    assert i == 1 and phrase == "aclnnSoftmax (call 2 of 2) returned 161002"


def test_no_call_out_of_tolerance_says_so():
    calls = [{"call": "aclnnMuls", "own_nmse": 1e-15}, {"call": "aclnnSoftmax", "own_nmse": 2e-14}]
    i, phrase = trace.blame(calls, 1e-7, 1e-3)
    assert i is None and phrase.startswith("every call computed what it was asked (no aclnn call out of tolerance")


def test_the_console_shows_the_blame_on_the_fail_line_and_the_calls_under_it(tmp_path):
    env = dict(os.environ, OPS_CANN_FAULT="softmax-bf16-logits", XDG_CACHE_HOME=str(tmp_path / "cache"))
    out = tmp_path / "r.json"
    p = subprocess.run([sys.executable, "-m", "cannops.cli.main", "test", "-b", "CANN-SIM", "-o", SOFT_MAX,
                        "--results", str(out)], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    fail = next(ln for ln in p.stdout.splitlines() if ln.endswith("FAIL") and "SOFT_MAX" in ln)
    assert "-> aclnnMuls (call 1 of 3, before aclnnSoftmax) out of tolerance" in fail
    assert "      > #1 aclnnMuls(self=FLOAT[1,1,16,16]" in p.stdout
    r = json.loads(out.read_text())["results"][0]
    assert r["blame"].startswith("aclnnMuls") and len(r["trace"]) == 3


@pytest.mark.parametrize("op", ["SOFT_MAX", "MUL_MAT", "ROPE", "FLASH_ATTN_EXT", "CONV_2D"])
def test_the_layers_own_trace_is_the_simulators(sim, op):
    """On a real device the layer records its aclnn calls itself (native/aclnn/trace.c):
    on the simulator, both record the same calls with the same arguments."""
    from cannops.cli.engine.execute import check_indices
    from cannops.native._aclnn import ffi, lib
    case = next(c for c in all_cases() if c.op == op and sim.supports(c, c.build()))
    g = case.build()
    inputs = case.init_inputs(g, 0)
    lib.ops_cann_trace_start()   # both recording one run (scratch addresses differ between runs)
    try:
        simulated = [c for c in sim.run_traced(case, g, inputs, check_indices(g)).calls
                     if c["call"].startswith("aclnn")]
    finally:
        native = json.loads(ffi.string(lib.ops_cann_trace_stop()))
    assert native and native == simulated
    # as CANN0 records a run: the layer's trace alone
    assert [c["call"] for c in sim._run_native_traced(case, g, inputs, check_indices(g)).calls] == \
        [c["call"] for c in native]


def _both_recorders(run):
    """One run recorded for a reproducer by the simulator (sim/trace.py, repro) and by the
    layer's own recorder (native/aclnn/trace.c) at once: both recordings."""
    from cannops.backend.cann.repro import NativeRecorder
    from cannops.backend.cann.sim import trace as simtrace
    native = NativeRecorder()
    native.start(repro=True)
    simtrace.start(repro=True)
    try:
        run()
    finally:
        simulated, recorded = simtrace.stop(), native.stop()
    # the rules the simulator tolerated and its warnings are its own: no real runtime says them
    simulated.calls = [{k: v for k, v in c.items() if k not in ("tolerated", "warnings")} for c in simulated.calls]
    return simulated, recorded


@pytest.mark.parametrize("op", ["SOFT_MAX", "ROPE", "FLASH_ATTN_EXT", "CONCAT", "MUL_MAT_ID"])
def test_the_layers_repro_recording_is_the_simulators(sim, op):
    """What a reproducer needs, recorded by the layer on a real device: the same records as
    the simulator's, call for call (allocations with the address given, copies with the
    bytes they moved, waits; tensors with their storage), and the same bytes."""
    from cannops.cli.engine.execute import check_indices
    case = next(c for c in all_cases() if c.op == op and sim.supports(c, c.build()))
    g = case.build()
    inputs = case.init_inputs(g, 0)
    simulated, native = _both_recorders(lambda: sim._run(g, inputs, check_indices(g)))
    names = {c["call"] for c in native.calls}
    assert {"aclrtMemcpy", "aclrtSynchronizeStream"} <= names and any(n.startswith("aclnn") for n in names)
    assert all("storage" in c["args"]["self"] for c in native.calls if "self" in c.get("args", {})
               and isinstance(c["args"]["self"], dict) and "dtype" in c["args"]["self"])
    assert native.calls == simulated.calls
    assert native.blobs == simulated.blobs and len(native.blobs) >= 2
    uploaded = b"".join(native.blobs[c["data"]] for c in native.calls
                        if c["call"] == "aclrtMemcpy" and c["args"]["kind"] == 1)
    assert inputs and all(np.ascontiguousarray(x).tobytes() in uploaded for x in inputs.values())


def test_the_layers_repro_recording_has_frees_memsets_and_refusals(sim):
    """testing.c's use-after-free (aclrtMalloc, a copy in, aclrtFree, a copy out), missing
    sync (aclrtMemset, a read before the wait), an async copy from the host and a refused
    one: both recorders agree, and the layer still reads the refusal's message after the
    recorder took it for the record."""
    from cannops.native._aclnn import ffi, lib
    err = ffi.new("char[512]")
    data, back = np.arange(256, dtype=np.uint8), np.zeros(256, np.uint8)
    x, before, after = np.linspace(-1, 1, 64, dtype=np.float32), np.zeros(64, np.float32), np.zeros(64, np.float32)
    rc, msg = [], []

    def run():
        rc.append(lib.ops_cann_test_use_after_free(sim.ctx, ffi.from_buffer(data), 256, ffi.from_buffer(back),
                                                   err, len(err)))
        rc.append(lib.ops_cann_test_missing_sync(sim.ctx, ffi.from_buffer("float[]", x), 64,
                                                 ffi.from_buffer("float[]", before), ffi.from_buffer("float[]", after),
                                                 err, len(err)))
        rc.append(lib.ops_cann_test_async_copy(sim.ctx, lib.OPS_TEST_COPY_PAGEABLE_H2D, err, len(err)))
        rc.append(lib.ops_cann_test_async_copy(sim.ctx, lib.OPS_TEST_COPY_UNALIGNED_D2D, err, len(err)))
        msg.append(ffi.string(err).decode())
    simulated, native = _both_recorders(run)
    assert rc[:3] == [0, 0, 0] and rc[3] != 0
    assert native.calls == simulated.calls and native.blobs == simulated.blobs
    names = [c["call"] for c in native.calls]
    assert names[:4] == ["aclrtMalloc", "aclrtMemcpy", "aclrtFree", "aclrtMemcpy"] and "aclrtMemset" in names
    assert native.blobs[native.calls[1]["data"]] == data.tobytes()                 # the bytes taken up
    assert native.blobs[native.calls[3]["data"]] == back.tobytes() == b"\xff" * 256   # the freed block's poison
    assert any(c["call"] == "aclrtMemcpyAsync" and c["args"]["kind"] == 1 and "data" in c for c in native.calls)
    refused = native.calls[-1] if native.calls[-1]["rc"] else next(c for c in native.calls if c["rc"])
    assert refused["call"] == "aclrtMemcpyAsync" and refused["rc"] == rc[3] and "data" not in refused
    assert refused["error"] and refused["error"] in msg[0]   # the layer's own report has it still


def test_a_refused_launch_is_its_own_record_in_both_traces(sim):
    """testing.c launches one executor twice: the second launch is refused."""
    from cannops.backend.cann.sim import trace as simtrace
    from cannops.native._aclnn import ffi, lib
    err = ffi.new("char[512]")
    lib.ops_cann_trace_start()
    simtrace.start()
    try:
        rc = lib.ops_cann_test_executor_reuse(sim.ctx, err, len(err))
    finally:
        simulated = simtrace.stop().calls
        native = json.loads(ffi.string(lib.ops_cann_trace_stop()))
    assert rc != 0
    launch = {"call": "aclnnMuls", "phase": "launch", "stream": native[0]["stream"], "rc": rc}
    assert native[1] == launch
    assert simulated[1] == {**launch, "error": simulated[1]["error"]} and "already launched" in simulated[1]["error"]
    i, phrase = trace.blame(simulated, None, None)
    assert i == 1 and phrase == f"aclnnMuls (call 2 of 2) returned {rc}"
