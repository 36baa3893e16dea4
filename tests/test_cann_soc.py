"""The 310P (ggml-cann's ASCEND_310P build): the rules' SoC branches, and `--soc` end to
end on CANN-SIM (the simulator's 310P tables, the layer's 310P paths, the results' SoC)."""
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("cannops.backend.cann")
from _sample import cases_of  # noqa: E402
from cannops.backend.cann import rules  # noqa: E402

OPS = [sys.executable, "-m", "cannops.cli.main"]


def _first(op, **want):
    return next(c for c in cases_of(op) if all(c.params.get(k) == v for k, v in want.items()))


@pytest.mark.parametrize("op, want, branch", [
    ("MUL_MAT", {"type_a": "q4_0"}, "ASCEND_310P"),
    ("MUL_MAT", {"type_a": "bf16"}, "ASCEND_310P"),
    ("OUT_PROD", {"type_a": "f32"}, "Ger is not supported"),
    ("CPY", {"type_src": "f32", "type_dst": "bf16"}, "F32 and F16 only"),
    ("POOL_2D", {"pool_type": "max"}, "max pooling"),
    ("GET_ROWS", {"type": "bf16"}, "ASCEND_310P"),
])
def test_310p_rules_follow_ggml_cann_branches(op, want, branch):
    case = _first(op, **want)
    graph = case.build()
    assert rules.supports(graph, soc="910B"), case.name
    why = rules.supports(graph, soc="310P")
    assert not why and branch in why.reason, (case.name, why.reason)


def test_310p_rope_takes_whole_contiguous_rows():
    partial = next(c for c in cases_of("ROPE") if c.params["n_dims"] < c.params["ne_a"][0])
    assert "whole rows" in rules.supports(partial.build(), soc="310P").reason


def _ops(*args, tmp_path):
    env = dict(os.environ, OPS_CACHE_DIR=str(tmp_path / "cache"))
    env.pop("CANN_SIM_SOC", None)
    return subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=600, env=env)


def test_soc_310p_end_to_end(tmp_path):
    # ROPE through the layer's 310P rotation (no aclnnRotaryPositionEmbedding there), an
    # average POOL_2D with cubeMathType 1 (no f32 cube), a refused bf16 and q4_0 MUL_MAT
    out = tmp_path / "r.json"
    proc = _ops("test", "-b", "CANN-SIM", "--soc", "310P", "-o", "ROPE,POOL_2D,MUL_MAT",
                "-p", r"ne_a=\[128,32,2,1\].*mode=[02],|pool_type=avg,type_input=f32,ne_input=\[10,10,3,1\],k0=3|type_a=(q4_0|bf16),type_b=f32,m=16,n=1,k=256,bs=\[1,1\]",
                "--results", str(out), tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    run = json.loads(out.read_text())
    assert [d["soc"] for d in run["devices"]] == ["Ascend310P3"]
    statuses = {(r["op"], r["status"]) for r in run["results"]}
    assert ("ROPE", "OK") in statuses and ("POOL_2D", "OK") in statuses
    assert ("MUL_MAT", "not supported") in {(op, s.split(" [")[0]) for op, s in statuses}


def test_support_column_per_soc(tmp_path):
    proc = _ops("support", "-b", "CANN-SIM", "--soc", "910B,310P", "-o", "OUT_PROD",
                "--output", "json", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    run = json.loads(proc.stdout)
    assert [(d["name"], d["soc"]) for d in run["devices"]] == [
        ("CANN-SIM:910B", "Ascend910B3"), ("CANN-SIM:310P", "Ascend310P3")]
    ok = {d: any(r["status"] == "OK" for r in run["results"] if r["device"] == d)
          for d in ("CANN-SIM:910B", "CANN-SIM:310P")}
    assert ok == {"CANN-SIM:910B": True, "CANN-SIM:310P": False}
