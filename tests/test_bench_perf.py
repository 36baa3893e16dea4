"""bench/run.py's perf comparison with test-backend-ops: both tools' outputs read per case,
and the ratios of their medians (the figures `make bench TBO=...` prints for issue 35)."""
import os
import subprocess
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "bench"))
import run as bench  # noqa: E402

OPS = [sys.executable, "-m", "cannops.cli.main"]
CASE = "ADD(type=f32,ne=[4096,1,1,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0)"
# test-backend-ops' perf line, colours and all (eval_perf's console printer)
TBO_LINE = ("  {case}:              \x1b[1;34m  81920 runs\x1b[0m -     {us} us/run -       48 kB/run - "
            "\x1b[1;34m  73.38 GB/s\x1b[0m\n")


@pytest.fixture(scope="module")
def ops_csv():
    p = subprocess.run([*OPS, "perf", "-b", "NUMPY", "-o", CASE, "--min-time", "0.01", "--output", "csv"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_ops_csv_is_read_per_case_with_its_spread_and_doubts(ops_csv):
    rows = bench.ops_perf_rows(ops_csv)
    assert list(rows) == [CASE]
    us, spread, doubted = rows[CASE]
    assert us > 0 and (spread is None or spread >= 0)
    assert doubted == ("spread unknown" in ops_csv or "busy machine" in ops_csv or "wide spread" in ops_csv)


def test_ratios_are_of_each_tools_median_over_runs(ops_csv):
    series = bench.PerfSeries()
    us = bench.ops_perf_rows(ops_csv)[CASE][0]
    other = "ADD(type=f32,ne=[8,1,1,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0)"
    for tbo_us in (us / 2, us / 4, 100 * us):      # the median is us / 2, whatever the outlier
        series.add(ops_csv, TBO_LINE.format(case=CASE, us=f"{tbo_us:.2f}") + TBO_LINE.format(case=other, us="1.00"))
    assert bench.tbo_perf_rows(TBO_LINE.format(case=CASE, us="5.34")) == {CASE: 5.34}
    assert series.ratios() == {CASE: pytest.approx(2.0, rel=1e-3)}   # the case only ops ran is left out
