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
    ("DIV", {"type": "f32"}, "Div"),
    ("ADD_ID", {}, "Add"),
    ("EXP", {}, "Exp"),
    ("IM2COL", {}, "Im2col"),
    ("SET_ROWS", {}, "InplaceIndexCopy"),
    ("NORM", {}, "LayerNorm"),
    ("SOLVE_TRI", {}, "TriangularSolve"),
    ("CONV_TRANSPOSE_1D", {}, "Slice"),
])
def test_310p_refuses_ops_whose_operators_its_pages_do_not_offer(op, want, operator):
    case = next(c for c in cases_of(op) if all(c.params.get(k) == v for k, v in want.items())
                and rules.supports(c.build(), soc="910B"))
    why = rules.supports(case.build(), soc="310P")
    assert not why and f"aclnn{operator} on 310P" in why.reason and "/docs/aclnn" in why.reason, \
        (case.name, why.reason)


def _one(op, pred):
    return next(c.build() for c in cases_of(op) if pred(c.params) and rules.supports(c.build(), soc="910B"))


def test_310p_refuses_only_the_paths_that_call_unoffered_operators():
    """Rule.calls: an operator a handler calls for some nodes only refuses those nodes."""
    pairs = [   # (op, a case without the operator, a case with it, the operator)
        ("TRI", lambda p: p["tri_type"] in (0, 1), lambda p: p["tri_type"] in (2, 3), "Tril"),
        ("PAD", lambda p: not p.get("circular"), lambda p: p.get("circular"), "CircularPad2d"),
        ("POOL_1D", lambda p: p["pool_type"] == "avg", lambda p: p["pool_type"] == "max", "MaxPool"),
        ("ROPE", lambda p: p["mode"] == 2 and p["n_dims"] == p["ne_a"][0] and not p["ff"]
         and p["ef"] == 0 and not p.get("v"), lambda p: p["ef"] != 0 and p["n_dims"] == p["ne_a"][0],
         "InplaceDivs"),
    ]
    for op, without, with_, operator in pairs:
        assert rules.supports(_one(op, without), soc="310P"), op
        why = rules.supports(_one(op, with_), soc="310P")
        assert not why and f"aclnn{operator} on 310P" in why.reason, (op, why.reason)


def test_310p_add_sub_and_masked_softmax_sum_a_pair(tmp_path):
    """ADD, SUB and SOFT_MAX's mask add run on 310P without aclnnAdd / aclnnSub /
    aclnnInplaceAdd (refused there): aclnnReduceSum over a pair of copies, to --strict."""
    proc = _ops("test", "-b", "CANN-SIM", "--soc", "310P", "--strict", "-o", "ADD,SUB,SOFT_MAX", "-p",
                r"^type=f(32|16),ne=\[10,5,4,3\],nr=\[2,2,2,2\],nf=1,perm1=0|ne=\[15,15,1,1\],mask=1,sinks=0,"
                r"m_prec=f(32|16),nr23=\[(1,1|2,3)\],scale=1.000000,max_bias=(0|8).000000",
                tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for op in ("ADD", "SUB", "SOFT_MAX"):
        assert f"{op}(" in proc.stdout and "FAIL" not in proc.stdout, proc.stdout[-2000:]
    assert " OK" in proc.stdout


def test_310p_get_rows_of_many_slices_gathers_slice_by_slice(tmp_path):
    """GET_ROWS' batched gather needs aclnnAdd: on 310P the layer gathers slice by slice,
    and the simulator (which refuses aclnnAdd there) computes the case."""
    # 20 slices (the batched path starts above 16), off the grid
    proc = _ops("test", "-b", "CANN-SIM", "--soc", "310P", "-o",
                "GET_ROWS(type=f32,n=256,m=5,r=4,be1=20,be2=1,v=0)", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "1/1 tests passed" in proc.stdout


def test_310p_neg_and_relu_take_muls_and_clamp_min(tmp_path):
    """NEG, RELU and REGLU on 310P, whose pages offer no aclnnNeg / aclnnRelu: aclnnMuls
    by -1 and aclnnClampMin at 0 (both offered there), exact to --strict."""
    proc = _ops("test", "-b", "CANN-SIM", "--soc", "310P", "--strict", "-o", "NEG,RELU,REGLU", "-p",
                r"^type=f(32|16),ne_a=\[(128,2,2,2|5,7,11,13)\],v=0(,swapped=0)?$", tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    for op in ("NEG", "RELU", "REGLU"):
        assert f"  {op}(" in proc.stdout, proc.stdout[-2000:]
    assert "not supported" not in proc.stdout and "FAIL" not in proc.stdout
