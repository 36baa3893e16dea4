"""`ops tbo --mode perf` (issue 42, part 3): test-backend-ops' perf lines read into results.

The lines are made here with the printf formats of tests/test-backend-ops.cpp (ggml 0.9.8
and 0.25.3 print the figures with the same formats; older ggml with `%5d runs` and the GB/s
form alone), through the console reader as they come from the binary (colour codes, the
name's padding); then end to end on ggml-cann's 910B build where make ggml-cann built it."""
import json
import pathlib
import subprocess
import sys

import pytest

from cannops.cli.engine.tbo_perf import perf_figures

ROOT = pathlib.Path(__file__).resolve().parents[1]
OPS = [sys.executable, "-m", "cannops.cli.main"]
GGML_CANN = ROOT / "build" / "ggml-cann"
BLUE, RESET = "\033[1;34m", "\033[0m"


def bandwidth_line(runs, us, kb, gbs, fmt="%8d"):
    return (fmt + " runs - %8.2f us/run - ") % (runs, us) + "%8d kB/run - %s%7.2f GB/s%s" % (kb, BLUE, gbs, RESET)


def flops_line(runs, us, per_run, unit_run, rate, unit_rate):
    return "%8d runs - %8.2f us/run - " % (runs, us) + "%6.2f %sFLOP/run - %s%6.2f %sFLOPS%s" % (
        per_run, unit_run, BLUE, rate, unit_rate, RESET)



def _plain(text: str) -> str:
    import re
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


@pytest.mark.parametrize("line, expected", [
    (bandwidth_line(8192, 0.12, 48, 372.53), {"n_runs": 8192, "time_us": 0.12, "memory_kb": 48,
                                             "bandwidth_gb_s": 372.53, "flops": 0.0}),
    (bandwidth_line(65, 15384.62, 81920, 5.2, fmt="%5d"), {"n_runs": 65, "time_us": 15384.62, "memory_kb": 81920,
                                                          "bandwidth_gb_s": 5.2, "flops": 0.0}),
    (flops_line(1, 6848290.53, 587.20, "M", 85.74, "M"), {"n_runs": 1, "time_us": 6848290.53, "flops": 85.74e6,
                                                        "flop_per_run": 587.20e6, "bandwidth_gb_s": 0.0}),
    (flops_line(4000, 12.5, 1.23, "G", 98.4, "T"), {"n_runs": 4000, "time_us": 12.5, "flops": 98.4e12,
                                                  "flop_per_run": 1.23e9, "bandwidth_gb_s": 0.0}),
    (flops_line(100, 3.0, 8.19, "k", 2.73, "G"), {"n_runs": 100, "time_us": 3.0, "flops": 2.73e9,
                                                "flop_per_run": 8.19e3, "bandwidth_gb_s": 0.0}),
])
def test_perf_figures_of_every_line_form(line, expected):
    got = perf_figures(_plain(line))
    assert got.keys() == expected.keys()
    for k, v in expected.items():
        assert got[k] == pytest.approx(v), k


@pytest.mark.parametrize("text", ["OK", "not supported", "FAIL", "12 runs - fast", ""])
def test_what_is_not_a_perf_line(text):
    assert perf_figures(text) is None
