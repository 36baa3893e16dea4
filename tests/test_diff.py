"""`ops diff OLD NEW` (issue 42, part 4): what a change did, per op and per case: status,
counted calls, kernels, bytes and syncs, measured us/run; console, markdown, csv; an op
whose status changes only because cases exist in one run says so on its row."""
import csv
import io
import subprocess
import sys

from cannops.backend.cost import empty
from cannops.cli.engine import CaseResult, DeviceInfo, Run

OPS = [sys.executable, "-m", "cannops.cli.main"]


def _cost(calls, kernels, read, written, syncs=1):
    c = empty()
    c.update(calls=calls, kernels=kernels, bytes_read=read, bytes_written=written, syncs=syncs)
    del c["per_call"]
    return c


def _r(op, params, status="OK", cost=None, **kw):
    return CaseResult(device="CANN0", op=op, params=params, status=status, cost=cost, **kw)


def _write(path, results, mode="test"):
    Run(mode=mode, devices=[DeviceInfo("CANN0")], results=results).write_json(str(path))
    return str(path)


def _runs(tmp_path):
    old = _write(tmp_path / "old.json", [
        _r("SCALE", "a", cost=_cost(1, 1, 400, 400)),
        _r("ADD", "a", cost=_cost(2, 2, 100, 50)),
        _r("ADD", "b", cost=_cost(1, 1, 10, 5)),
        _r("RMS_NORM", "a", status="FAIL", reason="x"),
        _r("RMS_NORM", "b", cost=_cost(3, 3, 30, 10)),
    ])
    new = _write(tmp_path / "new.json", [
        _r("SCALE", "a", cost=_cost(2, 2, 800, 800)),     # one call more, its bytes
        _r("ADD", "a", cost=_cost(2, 2, 100, 50)),
        _r("ADD", "b", cost=_cost(1, 1, 10, 5)),
        _r("RMS_NORM", "b", cost=_cost(3, 3, 30, 10)),     # the failing case is not in this run
        _r("RMS_NORM", "c", cost=_cost(3, 3, 30, 10)),
    ])
    return old, new


def _ops(*args):
    p = subprocess.run([*OPS, "diff", *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_console_lists_the_changed_cases_and_each_op(tmp_path):
    out = _ops(*_runs(tmp_path))
    scale = next(ln for ln in out.splitlines() if ln.startswith("SCALE(a)"))
    assert "1 → 2 (+1)" in scale and "800 → 1600 (+800)" in scale
    assert not any(ln.startswith("ADD(") for ln in out.splitlines())   # unchanged: not listed
    rms = next(ln for ln in out.splitlines() if ln.startswith("RMS_NORM "))
    assert "fail → supported" in rms and "status changes only by cases in one run" in rms
    assert "1 case(s) only in OLD (1 FAIL)" in rms and "1 case(s) only in NEW (1 OK)" in rms


def test_markdown_and_csv(tmp_path):
    old, new = _runs(tmp_path)
    md = _ops(old, new, "--markdown")
    assert md.startswith("### Device work: what changed") and "| SCALE | supported | 1 → 2 (+1)" in md
    rows = list(csv.DictReader(io.StringIO(_ops(old, new, "--output", "csv"))))
    scale = next(r for r in rows if r["case"] == "SCALE(a)")
    assert (scale["calls_old"], scale["calls_new"], scale["bytes_new"]) == ("1", "2", "1600")
    assert {"us/run_old", "GB/s_new", "GFLOPS_new"} <= set(rows[0])


def test_measured_figures_where_both_runs_have_them(tmp_path):
    old = _write(tmp_path / "o.json", [_r("ADD", "a", time_us=10.0, bandwidth_gb_s=2.0, n_runs=5)], "perf")
    new = _write(tmp_path / "n.json", [_r("ADD", "a", time_us=8.0, bandwidth_gb_s=2.5, n_runs=5)], "perf")
    line = next(ln for ln in _ops(old, new).splitlines() if ln.startswith("ADD(a)"))
    assert "10 → 8 (-2)" in line and "2 → 2.5 (+0.5)" in line


def test_bad_input_is_one_line(tmp_path):
    old, _ = _runs(tmp_path)
    (tmp_path / "bad.json").write_text("{}")
    p = subprocess.run([*OPS, "diff", old, str(tmp_path / "bad.json")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and len(p.stderr.strip().splitlines()) == 1
    p = subprocess.run([*OPS, "diff", old, old, "-b", "NOPE"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "NOPE" in p.stderr
