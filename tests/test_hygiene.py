"""Determinism and hygiene modes of `ops test` (issue 33, part 5; docs/hygiene.md): --repeat
requires bit-identical runs, --poison fills outputs with NaN and counts what a kernel left
unwritten, --check-inputs finds a kernel that wrote into an input its op does not write.
Each mode catches its planted fault (OPS_CANN_FAULT in the CANN layer, the after_compute
hook of a ggml device), and none fails a sample of correct cases."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from _sample import cases_of, sample
from cannops.backend.hygiene import NONE, POISON, Hygiene
from cannops.cases.catalog import all_cases
from cannops.cases.inplace import writers
from cannops.cli.engine.execute import CaseOptions, test as run_test

SCALE = "SCALE(type=f32,ne=[10,10,10,10],scale=2.000000,bias=0.000000,inplace=0)"
ALL = Hygiene(poison=True, inputs=True)


def case_named(name):
    return next(c for c in all_cases() if c.name == name)


def first_case(op, pred=lambda c: True):
    return next(c for c in all_cases() if c.op == op and pred(c))


# --- which inputs an op writes by definition (cases/inplace.py) ---

def leaf_names(case):
    g = case.build()
    return sorted(g.tensors[i].name or f"#{i}" for i in writers(g))


def test_the_inputs_an_op_writes_are_those_of_ggml():
    assert leaf_names(case_named(SCALE)) == []
    assert leaf_names(first_case("SCALE", lambda c: c.params["inplace"])) == ["a"]
    # SET_ROWS writes its destination (the tensor its result views; its src[0] holds the
    # rows), CPY its src[1]; their sources stay as they were
    set_rows = first_case("SET_ROWS").build()
    assert set(writers(set_rows)) == {set_rows.out.view_src.index} != {set_rows.out.src[0].base.index}
    cpy = first_case("CPY").build()
    assert set(writers(cpy)) == {cpy.out.src[1].base.index}
    # OPT_STEP_ADAMW updates the parameter and both moments, not the gradient nor params
    adamw = first_case("OPT_STEP_ADAMW").build()
    a, grad, m, v, params = adamw.out.src
    assert set(writers(adamw)) == {a.index, m.index, v.index}


# --- planted faults in ops' CANN layer, each caught by its mode only ---

@pytest.fixture
def sim(dev):
    if not dev.simulated:
        pytest.skip("the planted faults are checked on the simulator")
    return dev


def test_repeat_catches_a_nondeterministic_kernel(sim, monkeypatch):
    monkeypatch.setenv("OPS_CANN_FAULT", "scale-nondeterministic")
    case = case_named(SCALE)
    assert run_test(sim, case, CaseOptions(hygiene=ALL)).status == "OK"   # within NMSE, and clean
    r = run_test(sim, case, CaseOptions(repeat=3))
    assert r.status == "FAIL"
    assert r.reason.startswith("[SCALE] run 2 of 3 differs from run 1: ")
    n, first = r.reason.split(": ", 1)[1].split(" of ")[0], r.reason.split("first at index ")[1]
    assert int(n) > 0 and first.split(":")[0].isdigit()


def test_poison_counts_the_elements_a_kernel_never_wrote(sim, monkeypatch):
    monkeypatch.setenv("OPS_CANN_FAULT", "scale-short-rows")
    case = case_named(SCALE)
    ne = case.build().out.ne
    r = run_test(sim, case, CaseOptions(hygiene=Hygiene(poison=True)))
    assert r.status == "FAIL"
    rows, total = ne[1] * ne[2] * ne[3], ne[0] * ne[1] * ne[2] * ne[3]
    # the last element of every row, the first of them at index ne0 - 1
    assert r.reason.startswith(f"[SCALE] {rows} of {total} elements left unwritten (still the poison 0xff "
                               f"bytes), first at index {ne[0] - 1}")


def test_check_inputs_catches_a_write_into_an_input(sim, monkeypatch):
    monkeypatch.setenv("OPS_CANN_FAULT", "scale-into-src")
    case = case_named(SCALE)
    assert run_test(sim, case, CaseOptions(hygiene=Hygiene(poison=True))).status == "OK"   # the output is right
    r = run_test(sim, case, CaseOptions(hygiene=Hygiene(inputs=True)))
    assert r.status == "FAIL"
    total = case.build().out.nelements()
    assert r.reason.startswith(f"wrote into src[0] of SCALE (a): {total} of {total} elements changed, "
                               "first at index 0: ")
    was, now = map(float, r.reason.split("first at index 0: ")[1].split(" -> ")[0:2])
    assert now == pytest.approx(2 * was)   # src became the product


@pytest.mark.parametrize("fault, mode", [("scale-into-src", dict(hygiene=Hygiene(inputs=True))),
                                         ("scale-nondeterministic", dict(repeat=2))])
def test_a_fail_within_the_metric_keeps_its_calls_and_makes_no_replay(sim, monkeypatch, fault, mode):
    """The blame judges each call by the NMSE the outputs meet here: a hygiene mode's FAIL
    takes one traced run's calls, without their data, and no float64 replay."""
    monkeypatch.setenv("OPS_CANN_FAULT", fault)
    r = run_test(sim, case_named(SCALE), CaseOptions(**mode))
    assert r.status == "FAIL" and r.error <= r.threshold, r.reason
    assert "aclnnMuls" in [c["call"] for c in r.trace]
    assert r.blame == "" and not any("own_nmse" in c for c in r.trace)


# --- no false FAIL: correct cases stay as they were under every mode ---

SAMPLED = ("ADD", "MUL", "SCALE", "CPY", "SET_ROWS", "SET", "ACC", "CONCAT", "GET_ROWS", "ARGSORT",
           "SOFT_MAX", "RMS_NORM", "MUL_MAT", "ROPE", "OPT_STEP_ADAMW", "OPT_STEP_SGD", "SSM_CONV", "TOP_K")


@pytest.mark.parametrize("name", ["CANN-SIM", "GGML-CPU"])
def test_a_sample_of_correct_cases_passes_every_mode(name):
    from cannops.backend.base import list_devices, open_device
    if name not in dict(list_devices([name])):
        pytest.skip(f"no {name} here")
    cases = sample(cases_of(*SAMPLED), 40)
    dev = open_device(name)
    try:
        for c in cases:
            plain = run_test(dev, c)
            strict = run_test(dev, c, CaseOptions(hygiene=ALL, repeat=2))
            assert strict.status == plain.status, (c.name, plain.reason, strict.reason)
    finally:
        dev.close()


# --- a ggml device: the same checks, faults planted by its after_compute hook ---

@pytest.fixture(scope="module")
def cpu():
    ggml = pytest.importorskip("cannops.backend.ggml")
    d = ggml.open_device("GGML-CPU")
    d.n_threads = 1
    yield d
    d.close()


def plant(cpu, fault):
    """Run SCALE on the ggml device with `fault(replay, graph)` after its compute."""
    from cannops.backend.ggml import ffi, lib
    case = case_named(SCALE)
    g = case.build()
    a = g.out.src[0]

    def poke(r):
        fault(r, g, a, lib, ffi)
    cpu.after_compute = poke
    try:
        return case, g, cpu.run(case, g, case.init_inputs(g, 0), [g.out.index], hygiene=ALL)
    finally:
        cpu.after_compute = None


def test_a_ggml_device_reports_an_input_written_into(cpu):
    one = np.float32(7.0)

    def write_a(r, g, a, lib, ffi):
        lib.ggml_backend_tensor_set(r.ptrs[a.index], ffi.from_buffer(one), 12, 4)   # element 3 of a
    _, g, res = plant(cpu, write_a)
    assert len(res.problems) == 1
    assert res.problems[0].startswith("wrote into src[0] of SCALE (a): 1 of 10000 elements changed, "
                                      "first at index 3: ")
    assert res.problems[0].endswith(" -> 7")


def test_a_ggml_device_reports_an_output_left_poisoned(cpu):
    from cannops.backend.hygiene import unwritten_reason
    fill = np.full(8, POISON, np.uint8)

    def unwrite(r, g, a, lib, ffi):
        lib.ggml_backend_tensor_set(r.ptrs[g.out.index], ffi.from_buffer(fill), 40, 8)   # elements 10, 11
    _, g, res = plant(cpu, unwrite)
    assert list(res.unwritten[g.out.index]) == [10, 11]
    ref = np.zeros(g.out.nelements(), np.float32)
    assert unwritten_reason(g.out, res.unwritten[g.out.index], ref) == \
        "[SCALE] 2 of 10000 elements left unwritten (still the poison 0xff bytes), first at index 10"


def test_an_integer_output_whose_reference_is_minus_one_is_written():
    """0xFF bytes are -1 in an integer type: where the reference is -1, the element may
    well have been written, and is not counted."""
    from cannops.backend.hygiene import unwritten_reason
    g = first_case("SET", lambda c: c.params["type_dst"] == "i32").build()
    left = np.array([2, 5])
    ref = np.zeros(g.out.nelements(), np.int32)
    ref[2] = -1
    assert unwritten_reason(g.out, left, ref).startswith(f"[SET] 1 of {g.out.nelements()} elements left "
                                                         "unwritten (still the poison 0xff bytes), first at index 5")
    ref[5] = -1
    assert unwritten_reason(g.out, left, ref) == ""


def test_no_mode_costs_a_plain_run_anything(cpu, monkeypatch):
    """Off, the device neither fills nor reads back anything more: no poison, and one read
    of device memory per checked output (with --poison and --check-inputs, more)."""
    from cannops.backend.ggml import device as ggml_device
    case = case_named(SCALE)
    g = case.build()
    reads = []
    raw = ggml_device._raw
    monkeypatch.setattr(ggml_device, "_raw", lambda p: reads.append(p) or raw(p))
    res = cpu.run(case, g, case.init_inputs(g, 0), [g.out.index], hygiene=ALL)
    assert len(reads) > 1   # the modes read back the inputs and the output again
    reads.clear()
    monkeypatch.setattr(cpu, "_poison", lambda *a: pytest.fail("poisoned with no mode on"))
    res = cpu.run(case, g, case.init_inputs(g, 0), [g.out.index], hygiene=NONE)
    assert res.problems == [] and res.unwritten == {} and len(reads) == 1


# --- end to end, from the ops command ---

def ops(*args, env=None, tmp_path=None):
    e = dict(os.environ, **(env or {}))
    if tmp_path is not None:
        e["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    return subprocess.run([sys.executable, "-m", "cannops.cli.main", *args], capture_output=True,
                          text=True, env=e, timeout=300)


def test_the_modes_from_the_command_line(tmp_path):
    out = tmp_path / "r.json"
    p = ops("test", "-b", "CANN-SIM", "-o", SCALE, "--repeat", "2", "--poison", "--check-inputs",
            "--results", str(out), env={"OPS_CANN_FAULT": "scale-into-src"}, tmp_path=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    fail = next(ln for ln in p.stdout.splitlines() if ln.endswith("FAIL"))
    assert "wrote into src[0] of SCALE (a)" in fail
    run = json.loads(out.read_text())
    assert run["hygiene"] == "repeat=2,poison,check-inputs"
    assert run["results"][0]["status"] == "FAIL"
    # a plain run of the same case passes, and its results file names no mode
    p = ops("test", "-b", "CANN-SIM", "-o", SCALE, "--results", str(out), env={"OPS_CANN_FAULT": "scale-into-src"},
            tmp_path=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "hygiene" not in json.loads(out.read_text())


def test_a_bad_repeat_is_refused_before_any_work(tmp_path):
    p = ops("test", "-b", "CANN-SIM", "-o", "ADD", "--repeat", "0", "--results", str(tmp_path / "r.json"))
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "--repeat must be at least 1 (got 0)" in p.stderr
    assert not (tmp_path / "r.json").exists()


def test_a_resume_keeps_the_modes_of_its_run(tmp_path):
    out = tmp_path / "r.json"
    p = ops("test", "-b", "CANN-SIM", "-o", SCALE, "--poison", "--results", str(out), tmp_path=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    p = ops("test", "-b", "CANN-SIM", "-o", SCALE, "--resume", str(out), tmp_path=tmp_path)
    assert p.returncode == 2 and "hygiene 'poison' (now None)" in p.stderr, p.stderr


# --- the simulator's own switches, for any client (ggml-cann through the toolkit too) ---

SIM_SCRIPT = """
import numpy as np
from cannops.backend import cann
from cannops.native._aclnn import ffi, lib
d = cann.open_device("CANN-SIM")
p = d._alloc(4096)
buf = np.empty(4096, np.uint8)
lib.ops_cann_download(d.ctx, ffi.from_buffer(buf), p, 4096, *d._err())
print(sorted(set(buf.tolist())))
"""


def sim_process(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=120)


def test_cann_sim_poison_makes_fresh_device_memory_nan():
    assert sim_process(SIM_SCRIPT).stdout.strip() == "[165]"   # 0xA5: not zero, not NaN
    assert sim_process(SIM_SCRIPT, CANN_SIM_POISON="1").stdout.strip() == f"[{POISON}]"


def test_cann_sim_check_inputs_refuses_an_output_over_an_input(tmp_path):
    env = {"OPS_CANN_FAULT": "scale-into-src", "CANN_SIM_CHECK_INPUTS": "1"}
    p = ops("test", "-b", "CANN-SIM", "-o", SCALE, env=env, tmp_path=tmp_path)
    assert p.returncode == 1, p.stdout + p.stderr
    fail = next(ln for ln in p.stdout.splitlines() if ln.endswith("FAIL"))
    assert "aclnnMulsGetWorkspaceSize: out [" in fail
    assert "overlaps self [" in fail and "which aclnnMuls does not take in place (CANN_SIM_CHECK_INPUTS)" in fail
    # without the fault, the layer's calls pass the check
    p = ops("test", "-b", "CANN-SIM", "-o", SCALE, env={"CANN_SIM_CHECK_INPUTS": "1"}, tmp_path=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr


def test_the_layer_makes_no_aliasing_call_on_a_sample_of_the_catalog(tmp_path):
    """One case of every op on CANN-SIM with CANN_SIM_CHECK_INPUTS=1: no aclnn call of the
    layer writes its output over an input, but through an operator's documented in-place
    form (a *Ref parameter). The in-place CLAMP and LEAKY_RELU of v0.20.2 and SWIGLU_OAI's
    sigmoid once passed out == self to aclnnClamp / aclnnLeakyRelu / aclnnSigmoid."""
    out = tmp_path / "r.json"
    p = ops("test", "-b", "CANN-SIM", "--sample", "1", "-j", "2", "--results", str(out),
            env={"CANN_SIM_CHECK_INPUTS": "1"}, tmp_path=tmp_path)
    results = json.loads(out.read_text())["results"]
    refused = [f"{r['name']}: {r['reason']}" for r in results if "CANN_SIM_CHECK_INPUTS" in r["reason"]]
    assert not refused, "\n".join(refused)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr
    ran = {r["op"] for r in results if r["status"] == "OK"}
    assert {"CLAMP", "LEAKY_RELU", "SWIGLU_OAI"} <= ran and len(ran) > 80, sorted(ran)


def test_a_bad_switch_value_stops_acl_init():
    p = sim_process(SIM_SCRIPT, CANN_SIM_POISON="yes")
    assert "CANN_SIM_POISON='yes' is not 0 or 1" in p.stdout + p.stderr


def test_the_overlap_check_reaches_below_the_offset_with_a_negative_stride():
    """CANN_SIM_CHECK_INPUTS' byte span of a view: a reversed row of 4 f32 at offset 3 reads
    elements 0..3, the same span aclCreateTensor checks against the storage."""
    from types import SimpleNamespace
    from cannops.backend.cann.sim.hygiene import span
    f32 = np.dtype(np.float32)
    view = SimpleNamespace(np_dtype=f32, addr=0x1000, offset=3, dims=(4,), strides=(-1,))
    assert span(view) == (0x1000, 0x1010)
    rows = SimpleNamespace(np_dtype=f32, addr=0x1000, offset=2, dims=(2, 3), strides=(4, 1))
    assert span(rows) == (0x1008, 0x1008 + 7 * 4)
    empty = SimpleNamespace(np_dtype=f32, addr=0x1000, offset=2, dims=(0, 3), strides=(4, 1))
    assert span(empty) == (0x1008, 0x1008)


def test_a_huge_repeat_is_refused_before_any_work():
    """--repeat 10^9 made a case's limit 6*10^10 s: OverflowError in the pool's wait, a
    traceback; held at --timeout's bound, it ran 10^9 times (found by bench/probe43.py)."""
    p = ops("test", "-b", "NUMPY", "-o", "ABS(type=f32,ne_a=[5,7,11,13],v=0)", "--repeat", str(10 ** 9))
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr[-2000:]
    assert "--repeat must be at most 1,000 (got 1,000,000,000)" in p.stderr
    from cannops.cli.engine.spec import RunSpec
    assert RunSpec(timeout=1e6, repeat=1000).case_timeout("CANN-SIM") == 1e6
