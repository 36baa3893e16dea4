"""test-export-graph-ops files (test-backend-ops' --test-file) read by `ops test --cases`:
lines written here from catalog cases' nodes in that file's format (enum values, ne,
op_params, sources with strides), built back as generic_op cases and run."""
import struct
import subprocess
import sys

import pytest

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
