"""`ops perf --markdown` and `--plot`: tables to paste (against a baseline, or devices side
by side) whose speed-ups follow from the JSON figures, and a chart that names every device."""
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from cannops.cli.perf_report import markdown_side_by_side, markdown_vs_baseline, plot_perf
from cannops.cli.engine.results import OK, CaseResult, Run

OPS = [sys.executable, "-m", "cannops.cli.main"]
CASE = "ADD(type=f32,ne=[4096,1,1,1],nr=[1,1,1,1],nf=1,perm1=0,src_overlap=0)"


def tables(text: str) -> dict[str, list[dict[str, str]]]:
    """The markdown's tables by heading: each row as {column: cell}."""
    out, heading, header = {}, None, None
    for line in text.splitlines():
        if line.startswith("### "):
            heading, header = line[4:], None
            out[heading] = []
        elif line.startswith("|"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            if header is None:
                header = cells
            elif not set("".join(cells)) <= set("-:"):
                out[heading].append(dict(zip(header, cells)))
    return out


def perf_run(times: dict[str, dict[str, float]]) -> Run:
    """A perf run: device -> case name -> us/run (GB/s from a fixed size)."""
    run = Run(mode="perf")
    for dev, cases in times.items():
        for i, (name, t) in enumerate(cases.items()):
            op, _, params = name.partition("(")
            run.results.append(CaseResult(dev, op, params[:-1], OK, time_us=t, n_runs=10, index=i,
                                          flops=1e9 if op == "MUL_MAT" else 0.0, bandwidth_gb_s=1000.0 / t))
    return run


TWO = {"GGML-CPU": {"ADD(ne=[7,1,1,1])": 10.0, "ADD(ne=[9,1,1,1])": 30.0, "MUL_MAT(k=3)": 8.0},
       "CANN-SIM": {"ADD(ne=[7,1,1,1])": 40.0, "ADD(ne=[9,1,1,1])": 15.0, "MUL_MAT(k=3)": 2.0}}


def test_devices_side_by_side_per_op_with_speed_ups_from_the_times():
    t = tables("\n".join(markdown_side_by_side(perf_run(TWO))))
    assert list(t) == ["ADD", "MUL_MAT"]
    rows = {r["Case"]: r for r in t["ADD"]}
    assert set(rows) == {"ne=[7,1,1,1]", "ne=[9,1,1,1]"}
    for params, r in rows.items():
        cpu, sim = TWO["GGML-CPU"][f"ADD({params})"], TWO["CANN-SIM"][f"ADD({params})"]
        assert r["GGML-CPU us/run"].startswith(f"{cpu:.2f} (") and "GB/s" in r["GGML-CPU us/run"]
        assert float(r["CANN-SIM speed-up over GGML-CPU"]) == pytest.approx(cpu / sim, abs=0.005)
    assert "GFLOPS" in t["MUL_MAT"][0]["CANN-SIM us/run"]


def test_baseline_tables_per_device_and_op():
    run = perf_run(TWO)
    baseline = {"GGML-CPU": {"ADD(ne=[7,1,1,1])": 20.0, "MUL_MAT(k=3)": 4.0}, "CANN-SIM": {"MUL_MAT(k=3)": 3.0}}
    t = tables("\n".join(markdown_vs_baseline(run, baseline)))
    assert list(t) == ["ADD on GGML-CPU", "MUL_MAT on GGML-CPU", "ADD on CANN-SIM", "MUL_MAT on CANN-SIM"]
    first = t["ADD on GGML-CPU"]
    assert first[0] == {"Case": "ne=[7,1,1,1]", "Before us/run": "20.00", "After us/run": "10.00", "Speed-up": "2.00"}
    assert first[1]["Before us/run"] == "-" and first[1]["Speed-up"] == "-"     # new since the baseline
    assert t["MUL_MAT on CANN-SIM"][0]["Speed-up"] == "1.50"


def test_plot_names_every_device(tmp_path):
    path = tmp_path / "perf.svg"
    plot_perf(perf_run(TWO), str(path))
    root = ET.parse(path).getroot()
    text = " ".join("".join(el.itertext()) for el in root.iter() if el.tag.endswith("text"))
    for name in ("GGML-CPU", "CANN-SIM", "GB/s", "GFLOPS", "ADD(ne=[9,1,1,1])", "MUL_MAT(k=3)"):
        assert name in text


def test_ops_perf_markdown_against_a_baseline_and_a_plot(tmp_path):
    perf_run({"NUMPY": {CASE: 1e6}}).write_json(str(tmp_path / "old.json"))   # a slow past
    p = subprocess.run([*OPS, "perf", "-b", "NUMPY", "-o", CASE, "--min-time", "0.01", "--markdown",
                        "--baseline", str(tmp_path / "old.json"), "--results", str(tmp_path / "new.json"),
                        "--plot", str(tmp_path / "perf.svg")],
                       capture_output=True, text=True, timeout=300, env=dict(os.environ))
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("### ADD on NUMPY")        # the tables only: no case lines around them
    [row] = tables(p.stdout)["ADD on NUMPY"]
    after = json.loads((tmp_path / "new.json").read_text())["results"][0]["time_us"]
    assert float(row["After us/run"]) == pytest.approx(after, abs=0.005)
    assert float(row["Speed-up"]) == pytest.approx(1e6 / after, rel=1e-2)
    assert "NUMPY" in (tmp_path / "perf.svg").read_text()


@pytest.mark.parametrize("args, message", [
    (["--markdown", "--output", "csv"], "--markdown prints the tables"),
    (["--plot", "chart.txt"], "must end in .svg, .png, .pdf"),
])
def test_bad_markdown_and_plot_options(args, message):
    p = subprocess.run([*OPS, "perf", "-b", "NUMPY", "-o", CASE, *args], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and message in p.stderr and "Traceback" not in p.stderr
