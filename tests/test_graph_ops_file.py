"""test-export-graph-ops files (test-backend-ops' --test-file) read by `ops test --cases`:
lines written here from catalog cases' nodes in that file's format (enum values, ne,
op_params, sources with strides), built back as generic_op cases and run."""
import json
import pathlib
import re
import struct
import subprocess
import sys

import pytest

from _gguf_models import MODELS
from cannops.backend.base import list_devices
from cannops.cases.graph import OP_VALUE
from cannops.cases.graph_ops_file import is_graph_ops_file, parse_line, read_graph_ops
from cannops.cases.names import case_from_name

OPS = [sys.executable, "-m", "cannops.cli.main"]

# the shapes of a model's forward pass, as catalog cases; the export writes their op nodes
SOURCES = [
    "MUL_MAT(type_a=q8_0,type_b=f32,m=128,n=8,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)",
    "MUL_MAT(type_a=f16,type_b=f32,m=128,n=1,k=1057,bs=[2,1],nr=[4,1],per=[0,1,2,3],k_v=2113,o=1)",
    "RMS_NORM(type=f32,ne=[256,8,1,1],v=0,eps=0.000001,inplace=0)",
    "ROPE(type=f32,ne_a=[128,4,8,1],n_dims=128,mode=2,n_ctx=512,fs=1.000000,ef=0.000000,af=1.000000,ff=0,v=0,inplace=0)",
    "GET_ROWS(type=q8_0,n=256,m=512,r=8,be1=1,be2=1,v=0)",
    "SET_ROWS(type_src=f32,type_dst=f16,type_idx=i64,ne=[256,64,1,1],nr23=[1,1],r=8,v=0)",
    "SOFT_MAX(type=f32,ne=[16,8,1,1],mask=0,sinks=0,m_prec=f32,nr23=[1,1],scale=1.000000,max_bias=0.000000,inplace=0)",
    "SWIGLU(type=f32,ne_a=[512,8,1,1],v=0,split)",
    "SILU(type=f32,ne_a=[5,7,11,13],v=0)",
    "MUL_MAT_ID(type_a=q8_0,type_b=f32,n_mats=8,n_used=2,b=1,m=128,n=8,k=256)",
    "FLASH_ATTN_EXT(hsk=128,hsv=128,nh=2,nr23=[2,1],kv=256,nb=8,mask=1,sinks=0,max_bias=0.000000,"
    "logit_softcap=0.000000,prec=f32,type_K=f16,type_V=f16,permute=[0,2,1,3])",
]


def export_line(name: str, node_name: str = "-") -> str:
    """The test-export-graph-ops line of the last node of a catalog case's graph."""
    t = case_from_name(name).build().out
    words = struct.unpack("<16i", bytes(t.op_params))
    srcs = [s for s in t.src if s is not None][:2 if t.op == "SET_ROWS" else None]   # ggml's: [b, c]
    out = [OP_VALUE[t.op], t.type.value, *t.ne, 16, *words, len(srcs)]
    for s in srcs:
        out += [s.type.value, *s.ne, *s.nb]
    return " ".join(map(str, out)) + f" {node_name}"


def test_a_line_reads_back_as_the_node_it_came_from():
    line = export_line(SOURCES[1], "kq-3")
    p = parse_line(line)
    assert p["op"] == "MUL_MAT" and p["type"] == "f32" and p["name"] == "kq-3"
    assert p["sources"][0][0] == "f16" and p["sources"][0][1] == [1057, 128, 2, 1]
    (case,) = read_graph_ops([line], "0.25.3")
    assert case.name.startswith("MUL_MAT(name=kq-3,type=f32,ne=[128,1,8,1],op_params=[],sources=f16[1057,128,2,1]nb[")
    node = case.build().out
    assert node.src[0].nb == tuple(p["sources"][0][2]) and node.ne == (128, 1, 8, 1)


def test_the_format_is_told_apart_and_a_bad_line_named():
    assert is_graph_ops_file(["", "29 0 16 1 1 1 16 0 0"]) and not is_graph_ops_file(["ADD(type=f32)"])
    with pytest.raises(ValueError, match="line 2: .*unknown ggml op 999"):
        read_graph_ops([export_line(SOURCES[2]), "999 0 1 1 1 1 0 0 -"], "0.25.3")


def test_a_graph_ops_file_runs_on_ggml_cpu_and_cann_sim_without_fail(tmp_path):
    devices = [d for d in ("GGML-CPU", "CANN-SIM") if d in dict(list_devices())]
    if not devices:
        pytest.skip("neither GGML-CPU nor CANN-SIM here")
    path = tmp_path / "tests.txt"
    path.write_text("\n".join(export_line(n, f"node-{i}") for i, n in enumerate(SOURCES)) + "\n")
    r = subprocess.run([*OPS, "test", "--cases", str(path), "-b", ",".join(devices), "--no-ref-cache"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    assert r.stdout.count("MUL_MAT(name=node-0,") == len(devices)


# --- a real export: test-export-graph-ops of the 0.25.3 build (make ggml-cpu) ----------------

ROOT = pathlib.Path(__file__).resolve().parents[1]
PREFIX = ROOT / "build" / "ggml-cpu" / "prefix" / "bin"
EXPORT, TBO = PREFIX / "test-export-graph-ops", PREFIX / "test-backend-ops"
DATA = pathlib.Path(__file__).resolve().parent / "data"
SAMPLE = DATA / "export-graph-ops-qwen3.txt"          # lines of a real export (provenance: its head)
SAMPLE_NAMES = DATA / "export-graph-ops-qwen3.names"  # what that build's test-backend-ops named them


def _sample_lines() -> list[str]:
    return [line for line in SAMPLE.read_text().splitlines() if line and not line.startswith("#")]


def test_a_real_export_reads_back_as_test_backend_ops_names_its_lines():
    """Lines test-export-graph-ops wrote for a qwen3 GGUF, named as test-backend-ops 0.25.3's
    support mode listed them from the same file (--test-file): the same names, in order."""
    names = [line for line in SAMPLE_NAMES.read_text().splitlines() if line and not line.startswith("#")]
    assert [c.name for c in read_graph_ops(_sample_lines(), "0.25.3")] == names


def test_a_real_export_runs_on_ggml_cpu_and_cann_sim_without_fail(tmp_path):
    devices = [d for d in ("GGML-CPU", "CANN-SIM") if d in dict(list_devices())]
    if not devices:
        pytest.skip("neither GGML-CPU nor CANN-SIM here")
    path = tmp_path / "tests.txt"   # (the comment lines are ours: the binary's reader takes none)
    path.write_text("\n".join(_sample_lines()) + "\n")
    r = subprocess.run([*OPS, "test", "--cases", str(path), "-b", ",".join(devices), "--no-ref-cache"],
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    assert r.stdout.count(" tests passed") == len(devices)


@pytest.mark.skipif(not (EXPORT.exists() and TBO.exists()), reason="no 0.25.3 CPU build (make ggml-cpu)")
def test_a_model_exported_by_test_export_graph_ops_runs_through_ops_test_and_ops_tbo(tmp_path):
    """test-export-graph-ops on a qwen3 GGUF the tests write (its prompt and generation graphs:
    a ubatch of 8, one token), the file through `ops test --cases` (a sample per op, GGML-CPU
    and CANN-SIM: no FAIL) and through `ops tbo --cases` (the same build's test-backend-ops
    reads it as --test-file: every node once, named as ops names it)."""
    model, out = MODELS["qwen3"](tmp_path / "qwen3.gguf"), tmp_path / "tests.txt"
    r = subprocess.run([str(EXPORT), "-m", model, "-o", str(out), "-c", "256", "-b", "8", "-ub", "8", "-np", "1"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    lines = out.read_text().splitlines()
    cases = read_graph_ops(lines, "0.25.3")
    ops = {c.op for c in cases}
    assert {"MUL_MAT", "ROPE", "FLASH_ATTN_EXT", "RMS_NORM", "GET_ROWS", "SET_ROWS", "SWIGLU"} <= ops, ops
    devices = [d for d in ("GGML-CPU", "CANN-SIM") if d in dict(list_devices())]
    r = subprocess.run([*OPS, "test", "--cases", str(out), "-b", ",".join(devices), "--sample", "2", "-j", "2",
                        "--no-ref-cache"], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0 and "FAIL" not in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    res = tmp_path / "tbo.json"
    r = subprocess.run([*OPS, "tbo", str(TBO), "--cases", str(out), "-b", "CPU", "--results", str(res)],
                       capture_output=True, text=True, timeout=900)
    got = {x["name"]: x for x in json.loads(res.read_text())["results"]}
    assert sorted(got) == sorted(c.name for c in cases), r.stderr[-2000:]   # its names are ours
    # test-backend-ops' own FAILs: NaN on both sides, in memory test_generic_op leaves unset (the
    # gaps of a strided source's backing tensor, SET_ROWS's fresh output): never a difference
    both_nan = re.compile(r"\[\w+\] NaN at index \d+ \(CPU=-?nan CPU=-?nan\)")
    fails = [x for x in got.values() if x["status"] == "FAIL"]
    assert r.returncode == (1 if fails else 0) and {x["status"] for x in got.values()} <= {"OK", "FAIL"}
    assert all(both_nan.fullmatch(f.strip()) for x in fails for f in x["reason"].split("; ")), fails[:3]
