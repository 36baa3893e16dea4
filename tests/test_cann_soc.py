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


@pytest.mark.parametrize("op, want, operator", [
    ("ADD", {"type": "f32"}, "Add"),
    ("SUB", {"type": "f32"}, "Sub"),
    ("EXP", {"type": "f32"}, "Exp"),
    ("IM2COL", {}, "Im2col"),
    ("SET_ROWS", {"type_dst": "f32"}, "InplaceIndexCopy"),
    ("NORM", {}, "LayerNorm"),
    ("SOLVE_TRI", {}, "TriangularSolve"),
    ("CONV_TRANSPOSE_1D", {}, "Slice"),
])
def test_310p_takes_ops_whose_pages_say_no_where_the_source_offers_them(op, want, operator):
    """aclnn<operator>'s page says 不支持 for the Atlas inference series, but its source
    registers no A2 kernel either (or a 310P one) and op_api accepts the 310P: offered, and
    the op is supported there as ggml-cann's 310P build supports it."""
    from cannops.backend.cann.soc import UNOFFERED
    assert operator not in UNOFFERED["310P"]
    case = next(c for c in cases_of(op) if all(c.params.get(k) == v for k, v in want.items())
                and rules.supports(c.build(), soc="910B"))
    why = rules.supports(case.build(), soc="310P")
    assert why, (case.name, why.reason)


def _one(op, pred):
    return next(c.build() for c in cases_of(op) if pred(c.params) and rules.supports(c.build(), soc="910B"))


def test_310p_refuses_only_the_paths_that_call_unoffered_operators():
    """Rule.calls: an operator a handler calls for some nodes only refuses those nodes;
    ROPE lists aclnnRotaryPositionEmbedding but does not call it on 310P."""
    without = _one("PAD", lambda p: not p.get("circular"))
    assert rules.supports(without, soc="310P")
    why = rules.supports(_one("PAD", lambda p: p.get("circular")), soc="310P")
    assert not why and "aclnnCircularPad2d on 310P" in why.reason and "ascend310p" in why.reason, why.reason
    rope = _one("ROPE", lambda p: p["n_dims"] == p["ne_a"][0] and p["ef"] != 0 and not p.get("v"))
    assert "RotaryPositionEmbedding" in rules.RULES["ROPE"].aclnn and rules.supports(rope, soc="310P")


def test_a_refusal_is_data_that_evidence_reads_and_str_renders():
    """Rule.check answers a Refusal whose fields say which check failed, for which operator
    or tensor; evidence weighs those fields, never the words (a check whose reason reads as
    an unoffered operator's is still a check), and str() prints the sentence ops prints."""
    from cannops.backend.cann import evidence
    from cannops.backend.cann.refusal import Failed, Refusal

    circular = next(n for n in _one("PAD", lambda p: p.get("circular")).nodes() if n.op_key == "PAD")
    why = rules.RULES["PAD"].check(circular, "310P")
    assert (why.check, why.operator, why.soc) == (Failed.UNOFFERED, "CircularPad2d", "310P")
    assert str(why) == f"aclnnCircularPad2d on 310P: {why.reason}" and "ascend310p" in why.reason
    assert evidence.refused(why, [], "PAD") == evidence.operator_evidence("CircularPad2d", "310P")
    lookalike = Refusal("PAD", Failed.CHECK, "310P", str(why))
    assert evidence.refused(lookalike, [], "PAD").level == evidence.BUILD_CLAIMS
    branch = Refusal("PAD", Failed.SOC, "310P", "any words")   # ggml-cann's 310P code: the surer
    assert evidence.refused(lookalike, [branch], "PAD").level == evidence.DEVICE_PATH
    typed = Refusal("ADD", Failed.TYPE, "910B", argument="src1", type="q4_0", allowed=("f16", "f32"))
    assert str(typed) == "src1 type q4_0 not in {f16, f32}"


def test_310p_get_rows_of_many_slices(tmp_path):
    """GET_ROWS' batched gather (aclnnArange, aclnnAdd, one aclnnGatherV2) on 310P."""
    # 20 slices (the batched path starts above 16), off the grid
    proc = _ops("test", "-b", "CANN-SIM", "--soc", "310P", "-o",
                "GET_ROWS(type=f32,n=256,m=5,r=4,be1=20,be2=1,v=0)", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1/1 tests passed" in proc.stdout
