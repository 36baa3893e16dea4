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


# --- end to end on ggml-cann's 910B build ---------------------------------------------------

BINARY = GGML_CANN / "910B" / "bin" / "test-backend-ops"
# perf grid cases small enough for the simulator's host (a perf graph repeats the op up to
# 8,190 times; a MUL_MAT of the perf grid takes a minute or two there, its FLOP form is
# read in the tests above): the GB/s form (ADD, SOFT_MAX)
SAMPLE = ["-o", "ADD,SOFT_MAX", "-p", r"ADD=^type=f32,ne=\[4096,1,1,1\],nr=\[1,1,1,1\]",
          "-p", r"SOFT_MAX=^type=f32,ne=\[64,64,20,1\]"]


@pytest.mark.skipif(not BINARY.exists(), reason="make ggml-cann VARIANTS=910B has not run")
def test_perf_mode_on_the_simulated_910b_writes_results(tmp_path):
    out = tmp_path / "perf.json"
    p = subprocess.run([*OPS, "tbo", str(BINARY), "--mode", "perf", *SAMPLE, "--results", str(out)],
                       capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    run = json.loads(out.read_text())
    assert run["mode"] == "perf"
    got = {r["op"]: r for r in run["results"]}
    assert set(got) == {"ADD", "SOFT_MAX"}
    for op, r in got.items():
        assert r["status"] == "OK" and r["n_runs"] > 0 and r["time_us"] > 0, op
        # the simulated toolkit: the host's figure marked as the simulator's, the work counted
        assert r["clock"].startswith("the simulator's cost"), op
        assert r["cost"]["kernels"] >= r["n_runs"] == r["cost"]["runs"], op
        assert r["load"] is not None and r["flops"] == 0 and r["bandwidth_gb_s"] > 0, op
    assert got["ADD"]["memory_kb"] == 48   # op_size: the output and two sources, 4096 f32 each
    assert got["ADD"]["cost"]["kernels"] == got["ADD"]["n_runs"] + 1   # one aclnnAdd a run, and the warm-up's
    line = next(ln for ln in p.stdout.splitlines() if ln.strip().startswith("ADD("))
    assert "us/run (simulator's cost)" in line and "est." in line


def test_the_perf_reader_gives_each_case_its_figures():
    from cannops.cli.engine.tbo_perf import PerfReader
    got = []
    reader = PerfReader(got.append)
    name = "  ADD(type=f32,ne=[4096,1,1,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0): "
    for line in ["Backend 1/1: CANN0", "  Device description: Ascend910B3",
                 name + " " * 13 + bandwidth_line(8190, 185.27, 48, 0.25),
                 "  MUL_MAT(type_a=f16,type_b=f32,m=16,n=1,k=256): " + " " * 9 + flops_line(744, 2.5, 8.19, "k", 3.28, "G"),
                 "  SOFT_MAX(type=f32,ne=[4,4,1,1]): not supported"]:
        reader.feed(line + "\n")
    add, mm, sm = (x.result("CANN0") for x in got)
    assert (add.op, add.status, add.n_runs, add.time_us, add.memory_kb, add.bandwidth_gb_s) == \
        ("ADD", "OK", 8190, 185.27, 48, 0.25)
    assert add.params == name.strip()[4:-2] and add.clock.startswith("test-backend-ops' own")
    assert (mm.status, mm.n_runs, mm.flops) == ("OK", 744, pytest.approx(3.28e9))
    assert sm.status == "not supported" and sm.n_runs == 0 and sm.clock == ""
