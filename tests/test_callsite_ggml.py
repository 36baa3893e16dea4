"""Call sites and the numeric blame on ggml-cann itself (`make callsite-check`, the slow
test): ggml 0.25.3 with the faults of tests/plant_ggml_cann.py planted, built as the 910B
variant under CALLSITE_CHECK_BUILD (plants.json there says on which line each fault is).

* a wrong scalar that the simulator refuses (CUMSUM's dim): the FAIL's blame names the
  call and the planted line;
* a wrong scalar it cannot refuse (SCALE's, doubled): every call computed what it was
  asked, with the call and the planted line;
* a precision fault planted in the simulator (CANN_SIM_FAULT=softmax-bf16) under an
  unplanted op (SOFT_MAX): the numeric blame names aclnnSoftmax and its line."""
from __future__ import annotations

import json
import os
import pathlib
import subprocess

import pytest

from tests.test_tbo_trace import OPS

BUILD = os.environ.get("CALLSITE_CHECK_BUILD")
pytestmark = pytest.mark.skipif(not BUILD, reason="CALLSITE_CHECK_BUILD not set (make callsite-check)")


@pytest.fixture(scope="module")
def planted():
    root = pathlib.Path(BUILD)
    source = (root / "src" / "ggml" / "src" / "ggml-cann" / "aclnn_ops.cpp").read_text().splitlines()
    return (str(root / "ggml-cann" / "910B" / "bin" / "test-backend-ops"),
            json.loads((root / "plants.json").read_text()), source)


def tbo(binary, tmp_path, *args, env=None):
    base = {k: v for k, v in os.environ.items() if not k.startswith("CANN_SIM_")}
    p = subprocess.run([*OPS, "tbo", binary, *args, "--results", str(tmp_path / "r.json")],
                       capture_output=True, text=True, timeout=900, env={**base, **(env or {})})
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    return p, [r for r in results if r["status"] == "FAIL"]


def test_a_refused_scalar_is_blamed_on_its_call_and_line(planted, tmp_path):
    binary, plants, _ = planted
    p, failed = tbo(binary, tmp_path, "-o", "CUMSUM", "-p", r"type=f32,ne=\[10,5,4,3\]")
    assert p.returncode == 1 and len(failed) == 1, p.stdout
    line = plants["cumsum-dim"]
    assert failed[0]["blame"] == f"aclnnCumsum (call 1 of 1) in ggml_cann_cumsum, aclnn_ops.cpp:{line} returned 161002"
    # the abort's story, then its calls with their lines
    assert failed[0]["reason"].startswith("aborted") and "-> 161002" in p.stdout
    assert f"in ggml_cann_cumsum, aclnn_ops.cpp:{line}" in p.stdout


def test_a_wrong_scalar_is_every_call_computed_what_it_was_asked(planted, tmp_path):
    binary, plants, _ = planted
    p, failed = tbo(binary, tmp_path, "-o", "SCALE", "-p", r"type=f32,ne=\[10,10,10,10\],scale=2.000000,bias=0.0")
    assert p.returncode == 1 and len(failed) == 1, p.stdout
    r = failed[0]
    assert r["blame"].startswith("every call computed what it was asked"), r["blame"]
    assert f"aclnnMuls (call 1 of 1) in ggml_cann_scale, aclnn_ops.cpp:{plants['scale-twice']}" in r["blame"]
    muls = r["trace"][0]
    assert muls["args"]["other"]["scalar"] == 4.0 and muls["own_nmse"] < 1e-12   # asked 2 * 2, computed it
    assert "#1 aclnnMuls(self=FLOAT[10,10,10,10], other=4, out=FLOAT[10,10,10,10]) own NMSE" in p.stdout


def test_a_precision_fault_in_the_simulator_is_named_under_ggml_cann(planted, tmp_path):
    binary, _, source = planted
    case = r"type=f32,ne=\[16,16,1,1\],mask=1,sinks=0,m_prec=f32,nr23=\[1,1\],scale=1.000000,max_bias=0.000000"
    p, failed = tbo(binary, tmp_path, "-o", "SOFT_MAX", "-p", case)
    assert p.returncode == 0 and not failed, p.stdout   # without the fault it passes
    p, failed = tbo(binary, tmp_path, "-o", "SOFT_MAX", "-p", case, env={"CANN_SIM_FAULT": "softmax-bf16"})
    assert p.returncode == 1 and len(failed) == 1, p.stdout
    softmax = next(i for i, s in enumerate(source, 1) if "GGML_CANN_CALL_ACLNN_OP(ctx, Softmax," in s)
    blame = failed[0]["blame"]
    assert blame.startswith("aclnnSoftmax (call 3 of 3) in ") and f"aclnn_ops.cpp:{softmax}" in blame
    assert " out of tolerance (own NMSE " in blame
    assert [c["own_nmse"] < 1e-12 for c in failed[0]["trace"]] == [True, True, False]


@pytest.mark.skipif(not os.environ.get("CALLSITE_CHECK_REPRO"), reason="the bridge is not on the planted build")
def test_a_reproducers_calls_carry_their_lines(planted, tmp_path):
    """ops repro -b GGML-CANN0 (the bridge built against the planted prefix): trace.json's
    and the README's calls name the planted line."""
    binary, plants, _ = planted
    env = {k: v for k, v in os.environ.items() if not k.startswith("CANN_SIM_")}
    for line in (pathlib.Path(binary).parents[1] / "env.sh").read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export "):].partition("=")
            env[key] = value.strip("'")
    case = "SCALE(type=f32,ne=[10,10,10,10],scale=2.000000,bias=0.000000,inplace=0)"
    p = subprocess.run([*OPS, "repro", "-b", "GGML-CANN0", case, str(tmp_path / "r")], capture_output=True,
                       text=True, timeout=600, env=env)
    assert p.returncode == 0, p.stderr
    calls = json.loads((tmp_path / "r" / "trace.json").read_text())[-1]["calls"]
    muls = next(c for c in calls if c["call"] == "aclnnMuls")
    assert pathlib.Path(muls["at"][0][1]).name == "aclnn_ops.cpp" and muls["at"][0][2] == plants["scale-twice"]
    assert f"other=4, out=FLOAT[10,10,10,10]) in ggml_cann_scale, aclnn_ops.cpp:{plants['scale-twice']}" in \
        (tmp_path / "r" / "README.md").read_text()
