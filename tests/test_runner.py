"""The runner end to end through `ops`: worker isolation (abort, segfault, hang, overrun),
parallel and sharded runs, interrupts, and bad input."""
import ast
import os
import pathlib
import re
import signal
import subprocess
import time

import pytest
from _ops import OPS, ops, load

FAULTS = "abort=ABS,segv=NEG,hang=EXP,overrun=RELU"


def statuses(doc):
    return {(r["device"], r["name"]): r["status"] for r in doc["results"]}


def test_faults_become_fail_lines_and_the_run_goes_on(tmp_path):
    res = tmp_path / "r.json"
    p = ops("test", "-b", "FAULTY", "-o", "ABS,NEG,EXP,RELU,SGN", "-p", "type=f32", "--timeout", "3",
            "-j", "2", "--results", str(res), env={"OPS_FAULTY": FAULTS})
    assert p.returncode == 1, p.stderr
    doc = load(res)
    by_op = {}
    for r in doc["results"]:
        by_op.setdefault(r["op"], []).append(r)
    assert all(r["status"] == "FAIL" and "SIGABRT" in r["reason"] for r in by_op["ABS"])
    assert all(r["status"] == "FAIL" and "SIGSEGV" in r["reason"] for r in by_op["NEG"])
    assert all(r["status"] == "FAIL" and "timeout" in r["reason"] for r in by_op["EXP"])
    assert all(r["status"] == "FAIL" and "sentinel mismatch" in r["reason"] for r in by_op["RELU"])
    # every other case still ran, after all those worker deaths
    assert by_op["SGN"] and all(r["status"] == "OK" for r in by_op["SGN"])
    assert doc["summary"]["FAULTY"]["FAIL"] == 4 * 4
    # the console names the signal and quotes the worker's last output
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("  ABS("))
    assert "worker died: SIGABRT" in line and line.endswith("FAIL")
    assert "Fatal Python error" in p.stdout


def test_parallel_run_equals_serial_run(tmp_path):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    args = ["test", "-b", "FAULTY", "-o", "ABS,SGN,NEG,RELU,TANH", "--timeout", "20"]
    env = {"OPS_FAULTY": "abort=ABS,overrun=RELU"}
    ops(*args, "-j", "1", "--results", str(a), env=env)
    p = ops(*args, "-j", "2", "--results", str(b), env=env)
    assert statuses(load(a)) == statuses(load(b))
    assert load(a)["summary"] == load(b)["summary"]
    # console lines come out in case order whatever the number of workers
    names = [ln.split(":")[0].strip() for ln in p.stdout.splitlines() if ln.startswith("  ") and not ln.startswith("   ") and "=" in ln]
    assert names == [r["name"] for r in load(a)["results"]]


def test_two_shards_merge_into_the_unsharded_summary(tmp_path):
    args = ["test", "-b", "NUMPY", "-o", "ABS,SGN,NEG,SILU,GELU"]
    whole, s1, s2, merged = (tmp_path / f for f in ("w.json", "1.json", "2.json", "m.json"))
    ops(*args, "--results", str(whole))
    ops(*args, "--shard", "1/2", "--results", str(s1))
    ops(*args, "--shard", "2/2", "--results", str(s2))
    assert 0 < len(load(s1)["results"]) < len(load(whole)["results"])
    p = ops("merge", str(s1), str(s2), "--out", str(merged))
    assert p.returncode == 0, p.stderr
    assert load(merged)["summary"] == load(whole)["summary"]
    assert statuses(load(merged)) == statuses(load(whole))


def test_sigint_keeps_a_complete_partial_results_file(tmp_path):
    res = tmp_path / "r.json"
    env = dict(os.environ, OPS_FAULTY="hang=EXP", PYTHONUNBUFFERED="1")
    # in catalog order the two ABS cases come first, then EXP hangs
    proc = subprocess.Popen([*OPS, "test", "-b", "FAULTY", "-o", "ABS,EXP", "-p", "type=f16,.*v=0",
                             "--timeout", "600", "--results", str(res)],
                            stdout=subprocess.PIPE, text=True, env=env)
    seen = []
    while sum(ln.startswith("  ABS(") for ln in seen) < 2:
        line = proc.stdout.readline()
        assert line, "ops ended before printing the ABS cases"
        seen.append(line)
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130
    doc = load(res)
    assert doc["interrupted"] is True
    assert len(doc["results"]) == 2 and all(r["op"] == "ABS" and r["status"] == "OK" for r in doc["results"])
    assert "interrupted" in out


@pytest.mark.parametrize("args,message", [
    (["test", "-o", "SSM_CONVV"], "unknown op 'SSM_CONVV' (did you mean SSM_CONV"),
    (["test", "-p", "("], "bad -p regex"),
    (["test", "-b", "NOPE"], "unknown device 'NOPE'; available:"),
    (["test", "-j", "0"], "-j must be at least 1"),
    (["test", "--shard", "3/2"], "bad --shard '3/2'"),
    (["test", "--results", "/nonexistent-dir/r.json"], "cannot write /nonexistent-dir/r.json"),
    (["merge", "/nonexistent.json"], "cannot read /nonexistent.json"),
])
def test_bad_input_is_one_line_and_status_2(args, message):
    p = ops(*args)
    assert p.returncode == 2
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_malformed_results_file_is_rejected(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    p = ops("merge", str(bad))
    assert p.returncode == 2 and "not valid JSON" in p.stderr


def test_workers_spread_over_the_devices_of_a_kind(tmp_path):
    """-b FAULTY on a host with FAULTY0 and FAULTY1: one backend, its workers on both
    devices, the same statuses as one device alone (a crash replaces the worker in place)."""
    spread, single = tmp_path / "s.json", tmp_path / "1.json"
    env = {"OPS_FAULTY": "abort=ABS,slow=SGN", "OPS_FAULTY_DEVICES": "2"}   # slow: a second worker
    args = ["test", "-o", "ABS,SGN,NEG,RELU", "--timeout", "20"]
    p = ops(*args, "-b", "FAULTY", "-j", "2", "--results", str(spread), env=env)
    ops(*args, "-b", "FAULTY0", "--results", str(single), env=env)
    assert p.returncode == 1 and "Backend 1/1: FAULTY\n" in p.stdout
    s = load(spread)
    assert [d["name"] for d in s["devices"]] == ["FAULTY"]
    assert {r["ran_on"] for r in s["results"]} == {"FAULTY0", "FAULTY1"}
    assert {r["name"]: r["status"] for r in s["results"]} == \
        {r["name"]: r["status"] for r in load(single)["results"]}


def test_a_closed_output_pipe_still_leaves_the_results_file(tmp_path):
    """`ops test | head`: once the output buffer meets the closed pipe the run stops (exit
    128+SIGPIPE) and the results file holds what was computed, marked interrupted."""
    res = tmp_path / "r.json"
    proc = subprocess.Popen([*OPS, "test", "-b", "NUMPY", "-o", "CPY,CONCAT", "--results", str(res)],
                            stdout=subprocess.PIPE, text=True)
    while not proc.stdout.readline().startswith("  CPY("):  # one case has been printed
        pass
    proc.stdout.close()
    assert proc.wait(timeout=300) == 128 + signal.SIGPIPE
    doc = load(res)
    total = len(subprocess.run([*OPS, "list", "cases", "-o", "CPY,CONCAT"], capture_output=True,
                               text=True).stdout.split())
    assert doc["interrupted"] is True and 0 < len(doc["results"]) < total


def test_a_known_deviation_covers_only_its_cases():
    from cannops.cases.catalog import FAMILIES, Deviation, find_deviation
    notes = FAMILIES["sum"].notes
    permuted = dict(type="f32", ne=[33, 256, 1, 1], permute=[1, 0, 2, 3])
    plain = dict(type="f32", ne=[33, 256, 1, 1])
    assert "reads each row" in find_deviation(notes, ("ggml-cpu",), permuted).reason
    assert find_deviation(notes, ("ggml-cpu",), plain) is None      # a plain SUM that missed: FAIL
    assert find_deviation(notes, ("ggml-cuda0",), permuted) is None  # another device: no excuse either
    # a ceiling: the deviation explains errors up to max_error only
    capped = {"ggml-cpu": (Deviation("small", max_error=1e-3), Deviation("any", when=lambda p: "permute" in p))}
    assert find_deviation(capped, ("ggml-cpu",), plain, 5e-4).reason == "small"
    assert find_deviation(capped, ("ggml-cpu",), plain, 5e-3) is None
    assert find_deviation(capped, ("ggml-cpu",), permuted, 5e-3).reason == "any"


def test_the_catalog_names_no_device():
    """cases/ keys its notes and tolerances by implementation (cases/implementations.py),
    and each device says which it runs: an NPU and the simulator share the aclnn layer's,
    a 310P adds its own, and a note of the 310P is never the 910B's."""
    from cannops.backend.cann.device import CANNRules
    from cannops.cases.catalog import FAMILIES
    from cannops.cases.implementations import ALL
    keys = {k for f in FAMILIES.values() for k in (*f.notes, *f.grad_notes)} | {t.impl for f in FAMILIES.values()
                                                                                 for t in f.strict}
    assert keys - {""} <= set(ALL) and {"aclnn", "aclnn:310P", "ggml-cpu"} <= keys
    assert CANNRules("CANN-SIM", "", "Ascend910B3").implements == ("aclnn",)
    assert CANNRules("CANN0", "", "Ascend310P3").implements == ("aclnn:310P", "aclnn")
    devices = re.compile(r"\b(CANN\d|CANN-SIM|GGML-[A-Z]+\d*|NUMPY)\b")
    from cannops import cases
    for path in pathlib.Path(cases.__path__[0]).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                assert not devices.fullmatch(node.value.strip()), (path.name, node.value)


def test_solve_tri_deviation_has_a_backward_error_ceiling():
    """SOLVE_TRI's ill-conditioned cases: any f32 substitution (backward stable) meets the
    ceiling, however far its X is from the exact one; a wrong X does not."""
    import numpy as np
    from cannops.cases.catalog import FAMILIES, find_deviation
    p = dict(type="f32", ne_lhs=[128, 128, 2, 1], ne_rhs=[32, 128, 2, 1])
    rng = np.random.default_rng(1)
    a = np.tril(rng.uniform(0.1, 1.0, size=(1, 2, 128, 128))).astype(np.float32)   # as the catalog's
    b = rng.uniform(-1, 1, size=(1, 2, 128, 32)).astype(np.float32)
    x = np.zeros_like(b)   # forward substitution in f32, row by row
    for i in range(128):
        x[..., i, :] = (b[..., i, :] - np.einsum("...j,...jk->...k", a[..., i, :i], x[..., :i, :])) / a[..., i, i:i + 1]
    exact = np.linalg.solve(np.tril(a.astype(np.float64)), b.astype(np.float64))
    nmse = float(np.sum((x - exact) ** 2) / np.sum(exact ** 2))
    assert nmse > 1e-7   # the f32 X is far from the exact one: the deviation's subject
    dev = find_deviation(FAMILIES["solve_tri"].notes, ("ggml-cpu",), p, nmse)
    assert dev is not None and dev.holds(x, p, a, b) is None
    assert "backward error" in dev.holds(x * (1 + 1e-3), p, a, b)
    lost = x.copy()
    lost[..., 64, :] = 0   # a row of X lost
    assert "backward error" in dev.holds(lost, p, a, b)
    assert "non-finite" in dev.holds(np.full_like(x, np.nan), p, a, b)


def test_a_simulated_device_gets_ten_times_the_default_timeout_only():
    from cannops.cli.engine import RunSpec
    default = RunSpec(timeout=60.0)
    assert default.case_timeout("CANN-SIM") == 600.0 and default.case_timeout("GGML-CPU") == 60.0
    assert default.case_timeout("CANN-SIM:310P") == 600.0   # --soc's label: the same simulator
    given = RunSpec(timeout=60.0, timeout_given=True)     # --timeout 60: exact on every device
    assert given.case_timeout("CANN-SIM") == 60.0


def test_the_timeout_is_the_devices_a_big_cases_inputs_and_reference_are_timed_apart():
    """--timeout bounds the device's run: a case of 2 x 16M f32 leaves spends most of a
    second drawing its inputs and computing its reference (it was a timeout FAIL at 0.5 s,
    as MUL_MAT_ID's 128 q4_K experts were at the default 60 s), ggml's ADD a few ms."""
    from cannops.backend.base import list_devices
    if "GGML-CPU" not in [n for n, _ in list_devices()]:
        pytest.skip("no ggml bridge")
    # On a loaded machine every phase slows alike: the bound grows with the load per core
    # (at load 15 on 2 cores the unscaled 0.5 s timed the ADD out, inputs and all)
    limit = 0.5 * max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))
    p = ops("test", "-b", "GGML-CPU", "-o", "ADD", "-p", r"type=f32,ne=\[64,262144,1,1\]", "--timeout", f"{limit:.2f}")
    assert p.returncode == 0, p.stdout[-2000:]
    assert "ADD(type=f32,ne=[64,262144,1,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0): OK" in p.stdout


def test_an_option_of_ops_test_reaches_the_workers_as_a_run_spec_field():
    """Each option of `ops test` and `ops perf` is one run_mode takes itself (selection,
    devices, outputs), a report option, or a RunSpec field, which run_mode hands on whole:
    the spec is what the pool and every worker get (a new option is a field, nothing more)."""
    import dataclasses
    import inspect

    from cannops.cli import main
    from cannops.cli.engine import RunSpec, WorkerPool
    fields = {f.name for f in dataclasses.fields(RunSpec)}
    own = set(inspect.signature(main.run_mode).parameters) - {"spec_fields"}
    for command in (main.test, main.perf):
        names = {p.name for p in command.params if p.expose_value}
        assert names - own - fields <= {"log_dir", "summary_file", "baseline", "threshold_pct", "markdown",
                                         "plot_path", "timings"}, command.name
        assert names & fields   # strict / ref_cache, min_seconds / threads: to the spec
    spec = RunSpec(strict=True, seed=7)
    pool = WorkerPool("NUMPY", spec)
    try:
        assert pool.spec is spec and pool.timeout == spec.case_timeout("NUMPY")
    finally:
        pool.close()
