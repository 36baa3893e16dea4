"""`ops perf` for a CI: several devices side by side with their speed ratio, csv / json /
junit output, and a baseline that flags the cases that became slower."""
import csv
import io
import json
import xml.etree.ElementTree as ET

import pytest

from cannops.cli import plural
from cannops.cli.perf_report import slower_than_baseline
from cannops.cli.engine.results import CaseResult, DeviceInfo, Run
from _ops import ops

ADD = ["-o", "ADD", "-p", r"nr=\[1,1,1,1\]", "--min-time", "0.01"]


@pytest.fixture(scope="module")
def perf_json(tmp_path_factory):
    """One perf run of a small ADD case on the CPU, as a results file."""
    path = tmp_path_factory.mktemp("perf") / "perf.json"
    p = ops("perf", "-b", "GGML-CPU", *ADD, "--output", "json")
    assert p.returncode == 0, p.stderr
    path.write_text(p.stdout)
    return path


def timed(doc: dict, time_us: float) -> dict:
    """The run with every case taking time_us (far from any real timing: no flaky verdicts)."""
    doc = json.loads(json.dumps(doc))
    for r in doc["results"]:
        r["time_us"] = time_us
    return doc


def test_two_devices_side_by_side_with_their_ratio():
    p = ops("perf", "-b", "GGML-CPU", "-b", "NUMPY", *ADD, "--output", "csv")
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert rows and all(r["op"] == "ADD" for r in rows)
    for r in rows:
        cpu, ref = float(r["GGML-CPU us/run"]), float(r["NUMPY us/run"])
        assert cpu > 0 and ref > 0
        assert float(r["NUMPY vs GGML-CPU"]) == pytest.approx(cpu / ref, rel=1e-2)
        assert float(r["GGML-CPU GB/s"]) > 0 and r["GGML-CPU GFLOPS"] == ""
    # the console prints the same table after the runs
    p = ops("perf", "-b", "GGML-CPU,NUMPY", *ADD)
    assert p.returncode == 0, p.stderr
    head = next(ln for ln in p.stdout.splitlines() if ln.startswith("| Case"))
    assert "GGML-CPU us/run" in head and "NUMPY us/run" in head and "NUMPY vs GGML-CPU" in head
    assert sum(ln.startswith("| ADD(") for ln in p.stdout.splitlines()) == len(rows)


def test_one_device_csv_and_json_are_the_per_result_forms(perf_json):
    doc = json.loads(perf_json.read_text())
    assert doc["mode"] == "perf" and doc["results"]
    assert all(r["status"] == "OK" and r["time_us"] > 0 and r["n_runs"] > 0 for r in doc["results"])
    p = ops("perf", "-b", "GGML-CPU", *ADD, "--output", "csv")
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert [r["params"] for r in rows] == [r["params"] for r in doc["results"]]
    assert all(r["device"] == "GGML-CPU" and float(r["time_us"]) > 0 for r in rows)


def test_slower_than_baseline_flags_beyond_the_threshold_only():
    run = Run(mode="perf", devices=[DeviceInfo("CANN0")])
    run.results = [CaseResult("CANN0", "ADD", f"n={k}", "OK", time_us=t, n_runs=1, index=k)
                   for k, t in enumerate([100.0, 109.0, 111.0, 50.0])]
    run.results.append(CaseResult("CANN0", "ADD", "n=9", "not supported", index=9))
    base = {"CANN0": {"ADD(n=0)": 100.0, "ADD(n=1)": 100.0, "ADD(n=2)": 100.0, "ADD(n=3)": 100.0,
                      "ADD(n=9)": 1.0}}
    slower = slower_than_baseline(run, base, 10.0)
    assert list(slower["CANN0"]) == ["ADD(n=2)"]
    assert slower["CANN0"]["ADD(n=2)"] == (100.0, pytest.approx(11.0))
    # a one-device baseline under another name stands for the device
    assert list(slower_than_baseline(run, {"OTHER": base["CANN0"]}, 5.0)["CANN0"]) == ["ADD(n=1)", "ADD(n=2)"]
    assert slower_than_baseline(run, base, 20.0) == {}


def test_baseline_flags_slower_cases_through_ops(perf_json, tmp_path):
    doc = json.loads(perf_json.read_text())
    fast_then = tmp_path / "fast.json"   # 1 ns a run then: everything is slower now
    fast_then.write_text(json.dumps(timed(doc, 1e-3)))
    slow_then = tmp_path / "slow.json"   # 1 s a run then: nothing is
    slow_then.write_text(json.dumps(timed(doc, 1e6)))
    n = len(doc["results"])

    p = ops("perf", "-b", "GGML-CPU", *ADD, "--baseline", str(fast_then))
    assert p.returncode == 1, p.stderr
    assert f"{plural(n, 'case')} more than 10% slower than the baseline" in p.stdout
    p = ops("perf", "-b", "GGML-CPU", *ADD, "--baseline", str(slow_then), "--threshold", "5")
    assert p.returncode == 0, p.stderr
    assert "No case is more than 5% slower than the baseline." in p.stdout

    p = ops("perf", "-b", "GGML-CPU", *ADD, "--baseline", str(fast_then), "--output", "junit")
    assert p.returncode == 1
    root = ET.fromstring(p.stdout)
    fails = root.findall(".//failure")
    assert len(fails) == n and all(f.get("type") == "SLOWER" and "slower than the baseline" in f.get("message")
                                   for f in fails)
    assert root.get("failures") == str(n)

    # a per-result CSV of an earlier run is a baseline too
    base_csv = tmp_path / "fast.csv"
    rows = [dict(device="GGML-CPU", op=r["op"], params=r["params"], status="OK", time_us=r["time_us"])
            for r in timed(doc, 1e-3)["results"]]
    with open(base_csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    p = ops("perf", "-b", "GGML-CPU", *ADD, "--baseline", str(base_csv))
    assert p.returncode == 1 and f"{plural(n, 'case')} more than 10% slower" in p.stdout


@pytest.mark.parametrize("content,message", [
    (None, "cannot read baseline"),
    ("{oops", "not a valid ops results file"),
    ('{"schema": "ops-results/1", "mode": "test", "results": []}', "holds test results, not perf results"),
    ("a,b\n1,2\n", "neither a perf results file (JSON) nor a perf CSV"),
])
def test_bad_perf_baseline_is_one_line_and_status_2(tmp_path, content, message):
    base = tmp_path / "base"
    if content is not None:
        base.write_text(content)
    p = ops("perf", "-b", "GGML-CPU", *ADD, "--baseline", str(base))
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.count("\n") == 1 and message in p.stderr, p.stderr


def test_bad_threshold():
    p = ops("perf", "-b", "GGML-CPU", *ADD, "--threshold", "-1")
    assert p.returncode == 2 and "--threshold must be at least 0" in p.stderr
