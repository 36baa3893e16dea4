"""The device's time per case (CaseResult.device_seconds: its compute call alone) and
`ops test --timings`, which sets it against the tool's own time per op (cli/timings.py)."""
import json
import os
import subprocess
import sys

from cannops.cli.engine import CaseResult
from cannops.cli.timings import TINY_SECONDS, timing_lines, timing_rows

OPS = [sys.executable, "-m", "cannops.cli.main"]
ONE = r"type=f32,ne_a=\[128,2,2,2\],v=0"   # one case of each op


def _ops(*args, **env):
    return subprocess.run([*OPS, "test", *args], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "OPS_REF_CACHE": "off", **env})


def test_a_devices_compute_is_timed_apart_from_the_case():
    """FAULTY's slow ABS sleeps 0.1 s in its run, which it does not time apart: that run is
    its device time; NEG runs at once. ggml's CPU times its graph compute alone."""
    p = _ops("-b", "FAULTY,GGML-CPU", "-o", "ABS,NEG", "-p", ONE, "--output", "json",
             OPS_FAULTY="slow=ABS")
    assert p.returncode == 0, p.stderr
    results = json.loads(p.stdout)["results"]
    by = {(r["device"], r["op"]): r for r in results}
    assert len(by) == 4
    slow, fast = by[("FAULTY", "ABS")], by[("FAULTY", "NEG")]
    assert 0.1 <= slow["device_seconds"] <= slow["seconds"]
    assert 0 < fast["device_seconds"] < 0.1
    for op in ("ABS", "NEG"):
        r = by[("GGML-CPU", op)]
        assert 0 < r["device_seconds"] < r["seconds"]


def test_timings_print_each_ops_device_time_and_overhead():
    p = _ops("-b", "GGML-CPU", "-o", "ABS,NEG", "-p", ONE, "--timings")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    at = lines.index(next(ln for ln in lines if ln.startswith("Timings on GGML-CPU")))
    rows = {ln.split()[0]: ln.split() for ln in lines[at + 2:]}
    assert set(rows) == {"ABS", "NEG", "all"} and rows["all"][1] == "2"
    # with a machine-readable output, the table goes to stderr
    p = _ops("-b", "GGML-CPU", "-o", "ABS", "-p", ONE, "--timings", "--output", "json")
    assert json.loads(p.stdout)["results"] and "Timings on GGML-CPU" in p.stderr


def _r(op, seconds, device):
    return CaseResult("D", op, "x", "OK", seconds=seconds, device_seconds=device)


def test_the_overhead_is_the_cases_wall_less_the_device_and_tiny_cases_are_apart():
    big = TINY_SECONDS * 10
    rows = timing_rows([_r("A", 2 * big, big), _r("A", 0.002, 0.001), _r("B", 0.5, None), _r("C", big * 1.05, big)])
    (a, *_), (c, *_), (every, *_) = rows
    assert [row[0] for row in rows] == ["A", "C", "all"]           # B never ran on the device
    _, n, device, over, ratio, n_big, med = rows[0]
    assert (n, n_big) == (2, 1) and abs(device - (big + 0.001)) < 1e-12 and abs(over - (big + 0.001)) < 1e-12
    assert abs(med - 1.0) < 1e-9                                      # the tiny case is left out
    assert abs(rows[2][6] - 0.525) < 1e-9                             # median of 1.0 and 0.05
    assert any("C" in ln and "5.0%" in ln for ln in timing_lines("D", [_r("C", big * 1.05, big)]))
