"""`ops test --strict`: the per-element bound (cli/engine/strict.py), the families' looser bounds
with their reasons, the results' fields, and what it is for: the GELU family's former
CANN mappings (aclnn operators whose documented formula is another GELU) pass the NMSE of
test-backend-ops and FAIL the strict check, while correct results pass it."""
import csv
import io
import json
import subprocess
import sys
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from _sample import cases_of, sample

from cannops.backend.base import Device, RunResult, Support
from cannops.backend import reference
from cannops.backend.cann.sim import ops_unary
from cannops.backend.reference.glu import halves as glu_halves
from cannops.cases.catalog import FAMILIES, Tolerance, all_cases
from cannops.cli.engine import strict
from cannops.cli.engine.execute import CaseOptions, test as run_test
from cannops.cli.engine.results import FAIL, OK

OPS = [sys.executable, "-m", "cannops.cli.main"]


def _quick(v):
    """aclnnFastGelu's documented formula, x / (1 + exp(-1.702 x)), in float64."""
    return v / (1 + np.exp(-1.702 * v.astype(np.float64)))


def _erf(v):
    return ops_unary._gelu_erf(v.astype(np.float64))


# ggml op -> (the aclnn formula the CANN layer used to call, the one it calls now)
OLD_AND_NEW = {
    "GELU_ERF": (ops_unary._gelu_tanh, _erf),            # aclnnGelu -> aclnnGeluV2(none)
    "GELU_QUICK": (_erf, _quick),                         # aclnnGeluV2(none) -> aclnnFastGelu
    "GEGLU_QUICK": (_erf, _quick),                        # the same activation, gated
}


class Formula(Device):
    """Test-only: the case's one node computed with an aclnn operator's documented formula
    (act(x) or act(x) * g), from the inputs as the reference reads them."""
    name = "FORMULA"

    def __init__(self, act):
        self.act = act

    def supports(self, case, graph):
        return Support(True)

    def run(self, case, graph, inputs, check):
        mem = reference.compute(graph, inputs)
        node = graph.out
        if node.op == "GLU":
            srcs = [mem.read(s) for s in node.src if s is not None]
            a, g = glu_halves(node, *srcs, *[None] * (2 - len(srcs)))
            y = self.act(a.astype(np.float64)) * g
        else:
            y = self.act(mem.read(node.src[0]).astype(np.float64))
        return RunResult({node.index: y.astype(node.type.dtype)})


def _f32_cases(op):
    return [c for c in cases_of(op) if c.params["type"] == "f32"]


@pytest.mark.parametrize("op", sorted(OLD_AND_NEW))
def test_old_gelu_mappings_pass_the_nmse_and_fail_strict(op):
    old, new = OLD_AND_NEW[op]
    for case in _f32_cases(op):
        assert run_test(Formula(new), case, CaseOptions(strict=True)).status == OK, case.name
        loose = run_test(Formula(old), case)
        tight = run_test(Formula(old), case, CaseOptions(strict=True))
        if op == "GELU_ERF":   # tanh for erf: only the per-element check sees it
            assert loose.status == OK, (case.name, loose.reason)
        assert tight.status == FAIL and "strict:" in tight.reason, (case.name, tight.reason)
        assert tight.max_abs > 0 and tight.worst_index >= 0


def test_the_bound_and_its_figures():
    b = strict.Bound(rtol=1e-3, atol=1e-5, why="test")
    ref = np.array([1.0, -2.0, 0.0, 100.0], np.float32)
    assert strict.check("[X]", ref, ref.copy(), b, "DEV").ok
    out = ref.copy()
    out[3] += 0.05                     # 0.05 <= 1e-5 + 0.1: within
    out[2] = 2e-5                      # 2e-5 > 1e-5: outside, the worst element
    s = strict.check("[X]", ref, out, b, "DEV")
    assert not s.ok and s.worst == 2
    assert s.max_abs == pytest.approx(0.05, rel=1e-3) and s.max_rel == np.inf
    assert "[X] strict: 1/4 elements over" in s.reason and "worst element 2" in s.reason
    # NaN and infinities are left to the NMSE check, which fails on them first
    inf = np.array([np.inf, 1.0], np.float32)
    assert strict.check("[X]", inf, inf.copy(), b, "DEV").ok


def test_defaults_per_output_type_and_family_loosening():
    gelu = next(c for c in cases_of("GELU") if c.params["type"] == "f32")
    node = gelu.build().out
    cpu, sim = strict.bound(gelu, ("ggml-cpu",), node), strict.bound(gelu, ("aclnn",), node)
    assert (sim.rtol, sim.atol) == strict.DEFAULT["f32"] and sim.why == "f32 default"
    assert cpu.rtol > sim.rtol and "f16 table" in cpu.why         # that device's loosening only
    i32 = next(c for c in cases_of("ARGMAX"))
    assert strict.bound(i32, ("ggml-cpu",), i32.build().out).rtol == 0.0     # integers: exact


def test_every_loosening_says_why_and_loosens():
    all_cases()                                        # every family registered
    loosened = [fam for fam in FAMILIES.values() if fam.strict]
    assert len(loosened) >= 10
    for fam in loosened:
        for t in fam.strict:
            assert isinstance(t, Tolerance) and len(t.reason) > 20, fam.name
            assert min(t.rtol, t.atol, t.atol_rms) >= 0 and max(t.rtol, t.atol, t.atol_rms) > 0, fam.name


def test_correct_results_pass_strict_on_ggml_cpu():
    """A sample across the catalog (the broad runs: the report of issue 10)."""
    picked = sample([c for c in all_cases() if c.op not in ("FLASH_ATTN_EXT", "CONV_2D", "IM2COL_3D")], 40)
    results = run_cases_strict("GGML-CPU", picked)
    bad = [f"{r.name}: {r.reason}" for r in results if r.status == FAIL]
    assert not bad, "\n".join(bad[:5])
    assert sum(r.status == OK for r in results) > 20


def run_cases_strict(device_name, cases):
    from cannops.backend.base import open_device
    dev = open_device(device_name)
    try:
        return [run_test(dev, c, CaseOptions(strict=True)) for c in cases]
    finally:
        dev.close()


def test_results_record_strict(tmp_path):
    res = tmp_path / "r.json"
    name = "GELU_ERF(type=f32,ne_a=[128,2,2,2],v=0)"
    p = subprocess.run([*OPS, "test", "--strict", "-b", "GGML-CPU", "-o", name, "--results", str(res),
                        "--output", "csv"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    doc = json.loads(res.read_text())
    assert doc["strict"] == strict.STANDARD
    r, = doc["results"]
    assert r["strict"] is True and r["max_abs"] is not None and r["worst_index"] >= 0
    row, = csv.DictReader(io.StringIO(p.stdout))
    assert row["strict"] == "True" and float(row["max_rel"]) >= 0
    # without --strict: no per-element figures, the run says so
    p = subprocess.run([*OPS, "test", "-b", "GGML-CPU", "-o", name, "--output", "json"],
                       capture_output=True, text=True, timeout=300)
    doc = json.loads(p.stdout)
    assert doc["strict"] is None and doc["results"][0]["strict"] is False
    assert doc["results"][0]["max_abs"] is None


def test_a_strict_failure_in_junit_and_on_the_fail_line():
    from cannops.cli.junit import junit_xml
    from cannops.cli.engine.results import DeviceInfo, Run
    case = _f32_cases("GELU_QUICK")[0]
    r = run_test(Formula(_erf), case, CaseOptions(strict=True))
    run = Run(mode="test", strict=strict.STANDARD, results=[r], devices=[DeviceInfo("FORMULA")])
    root = ET.fromstring(junit_xml(run).split("\n", 1)[1])
    f = root.find(".//failure")
    assert "strict:" in f.get("message") and "worst element" in f.text
    props = {p.get("name"): p.get("value") for p in root.iter("property")}
    assert props["strict"] == strict.STANDARD
