"""Device work counted on the simulator (issue 42, part 1): each aclnn call's bytes and FLOPs
and a case's calls, kernels, copies and syncs, through ops' own aclnn layer (CANN-SIM) and
through ggml-cann's test-backend-ops on the simulated toolkit (`ops tbo --cost`).

The expected numbers are worked out here by hand from the case's shapes: which aclnn calls
the op is realised with (native/aclnn/ops_*.c; ggml-cann's aclnn_ops.cpp), the elements
each call's tensors name times the element size, and the FLOP formula of the operator
(docs/device-work.md: 1 per element for element-wise calls, 5 for a softmax, 3 for a
rotary embedding, 0 for copies and casts, 2 per multiply-add on the cube)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from cannops.backend.cost import summarise

ROOT = pathlib.Path(__file__).resolve().parents[1]
OPS = [sys.executable, "-m", "cannops.cli.main"]
GGML_CANN = ROOT / "build" / "ggml-cann" / "910B" / "bin" / "test-backend-ops"
F32, F16 = 4, 2


def call(op, unit, flops, read, written):
    return {"op": f"aclnn{op}", "unit": unit, "flops": flops, "bytes_read": read, "bytes_written": written}


def V(op, flops, read, written):
    return call(op, "vector", flops, read, written)


def C(op, flops, read, written):
    return call(op, "cube", flops, read, written)


# ADD(ne=[10,5,4,3], nr=[2,1,1,1]): a is ne*nr = 20*5*4*3 elements, b (broadcast) 10*5*4*3
A, B = 20 * 5 * 4 * 3, 10 * 5 * 4 * 3
ADD = [V("Add", A, F32 * (A + B), F32 * A)]
# MUL_MAT(m=16, n=1, k=256): weight [k, m], activations [k, n], out [m, n]; 2*m*n*k on the cube
M, N, K = 16, 1, 256
MUL_MAT_F16 = [C("Mm", 2 * M * N * K, F16 * K * M + F32 * K * N, F32 * M * N)]
# q4_0: the activations cast to f16, the weight as INT4 (two a byte) with an f16 scale per
# block of 32 along k, the f16 result cast back to f32
MUL_MAT_Q4_0 = [V("Cast", 0, F32 * K * N, F16 * K * N),
                C("WeightQuantBatchMatmulV2", 2 * M * N * K, F16 * K * N + K * M // 2 + F16 * (K // 32) * M,
                  F16 * M * N),
                V("Cast", 0, F16 * M * N, F32 * M * N)]
# ROPE(ne_a=[128,32,2,1], n_dims=128, mode 0): theta = positions (2 int32) x theta_scale^i
# (64 f32), its sin and cos, each repeated to 128 per position, then the rotation of x
# (128*32*2 f32) by sin and cos: 3 FLOPs an element
P, HALF, X = 2, 64, 128 * 32 * 2
ROPE = [V("Mul", P * HALF, 4 * P + F32 * HALF, F32 * P * HALF),
        V("Sin", P * HALF, F32 * P * HALF, F32 * P * HALF),
        V("Cos", P * HALF, F32 * P * HALF, F32 * P * HALF),
        V("RepeatInterleaveIntWithDim", 0, F32 * P * HALF, F32 * P * 2 * HALF),
        V("RepeatInterleaveIntWithDim", 0, F32 * P * HALF, F32 * P * 2 * HALF),
        V("RotaryPositionEmbedding", 3 * X, F32 * X + 2 * F32 * P * 2 * HALF, F32 * X)]
# SOFT_MAX(ne=[16,16,1,1], mask f32, scale 1): x*scale, += mask, softmax (5 FLOPs an element)
S = 16 * 16
SOFT_MAX = [V("Muls", S, F32 * S, F32 * S), V("InplaceAdd", S, 2 * F32 * S, F32 * S),
            V("Softmax", 5 * S, F32 * S, F32 * S)]
# FLASH_ATTN_EXT(hsk=hsv=64, nh=4, kv=512, nb=1, f16 K/V): Q (64*1*4 f32) cast to f16, the
# fused attention reading Q, K, V (64*512*4 f16 each) and the mask as a [1, nh, nb, kv] f16
# view, 2*kv*(|Q| + |out|) on the cube, its f16 output cast to f32
D, KV, NH = 64, 512, 4
Q, KVE, MASK = D * NH, D * KV * NH, NH * KV
FIA = C("FusedInferAttentionScoreV2", 2 * KV * (Q + Q), F16 * (Q + 2 * KVE + MASK), F16 * Q)
# ops' layer copies K and V into contiguous f16 tensors and repeats the mask over the heads
FLASH_ATTN_OWN = [V("Cast", 0, F32 * Q, F16 * Q), V("InplaceCopy", 0, F16 * KVE, F16 * KVE),
                  V("InplaceCopy", 0, F16 * KVE, F16 * KVE), V("Repeat", 0, F16 * KV, F16 * MASK),
                  FIA, V("Cast", 0, F16 * Q, F32 * Q)]
# ggml-cann hands the K / V views and the mask's broadcast view to the operator as they are
FLASH_ATTN_GGML_CANN = [V("Cast", 0, F32 * Q, F16 * Q), FIA, V("Cast", 0, F16 * Q, F32 * Q)]

FA = ("FLASH_ATTN_EXT(hsk=64,hsv=64,nh=4,nr23=[1,1],kv=512,nb=1,mask=1,sinks=0,max_bias=0.000000,"
      "logit_softcap=0.000000,prec=f32,type_K=f16,type_V=f16,permute=[0,1,2,3]")
OWN = {
    "ADD(type=f32,ne=[10,5,4,3],nr=[2,1,1,1],nf=1,perm1=0,src_overlap=0)": ADD,
    "MUL_MAT(type_a=f16,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)": MUL_MAT_F16,
    "MUL_MAT(type_a=q4_0,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1)": MUL_MAT_Q4_0,
    "ROPE(type=f32,ne_a=[128,32,2,1],n_dims=128,mode=0,n_ctx=512,fs=1.000000,ef=0.000000,af=1.000000,ff=0,v=0,"
    "inplace=0)": ROPE,
    "SOFT_MAX(type=f32,ne=[16,16,1,1],mask=1,sinks=0,m_prec=f32,nr23=[1,1],scale=1.000000,max_bias=0.000000,"
    "inplace=0)": SOFT_MAX,
    FA + ")": FLASH_ATTN_OWN,
}
# the same cases as test-backend-ops 0.25.3 names them (its newer params at their defaults)
GGML_CANN_CASES = {
    "ADD(type=f32,ne=[10,5,4,3],nr=[2,1,1,1],nf=1,perm1=0,src_overlap=0)": ADD,
    "MUL_MAT(type_a=f16,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0,"
    "m_v=0,pad=0)": MUL_MAT_F16,
    "MUL_MAT(type_a=q4_0,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,src_overlap=0,"
    "m_v=0,pad=0)": MUL_MAT_Q4_0,
    "ROPE(type=f32,ne_a=[128,32,2,1],n_dims=128,mode=0,n_ctx=512,fs=1.000000,ef=0.000000,af=1.000000,ff=0,v=0,"
    "inplace=0,n_offs=0)": ROPE,
    "SOFT_MAX(type=f32,ne=[16,16,1,1],mask=1,sinks=0,m_prec=f32,nr23=[1,1],scale=1.000000,max_bias=0.000000,"
    "inplace=0)": SOFT_MAX,
    FA + ",kv_view=1,v_is_view_of_k=0,n_kv_max=0)": FLASH_ATTN_GGML_CANN,
}


def check_counted(cost: dict, expected: list[dict]) -> None:
    """The case's calls one by one, and its totals as their sums (one kernel a call)."""
    got = [{k: c[k] for k in ("op", "unit", "flops", "bytes_read", "bytes_written")} for c in cost["per_call"]]
    assert got == expected
    assert cost["calls"] == cost["kernels"] == len(expected)
    assert cost["bytes_read"] == sum(c["bytes_read"] for c in expected)
    assert cost["bytes_written"] == sum(c["bytes_written"] for c in expected)
    for unit in ("cube", "vector"):
        assert cost["flops"][unit] == sum(c["flops"] for c in expected if c["unit"] == unit)


def _write_cases(path: pathlib.Path, names) -> str:
    path.write_text("".join(n + "\n" for n in names))
    return str(path)


def _ops(*args, timeout=600) -> subprocess.CompletedProcess:
    p = subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p


def _costs(results: pathlib.Path) -> dict[str, dict]:
    return {f"{r['op']}({r['params']})": r["cost"] for r in json.loads(results.read_text())["results"]}


@pytest.fixture(scope="module")
def own_run(tmp_path_factory):
    """The cases through ops' layer on CANN-SIM, -j 1 and -j 2, with --cost."""
    d = tmp_path_factory.mktemp("cost")
    cases = _write_cases(d / "cases.txt", OWN)
    runs = []
    for jobs in ("1", "2"):
        out = d / f"r{jobs}.json"
        p = _ops("test", "-b", "CANN-SIM", "--cases", cases, "--cost", "-j", jobs, "--results", str(out))
        runs.append((p.stdout, _costs(out)))
    return runs


@pytest.mark.parametrize("name", list(OWN))
def test_ops_layer_counts_by_hand(own_run, name):
    check_counted(own_run[0][1][name], OWN[name])


def test_counts_are_the_same_across_runs_and_workers(own_run):
    (_, one), (_, two) = own_run
    assert one == two and all(c is not None for c in one.values())
    # ops' layer: every case counted from an empty pool, its allocations its own
    assert all(c["allocs"] > 0 and c["syncs"] > 0 for c in one.values())


def test_the_console_table_lists_cases_and_ops(own_run):
    out = own_run[0][0]
    assert "Device work counted on CANN-SIM" in out
    assert "est. µs (910B)" in out and "not a measurement" in out   # the perf model's, labelled
    rope = next(ln for ln in out.splitlines() if ln.startswith("ROPE") and "ne_a" not in ln)
    assert rope.split()[1:4] == ["1", "6", "6"]   # op, cases, calls, kernels


def test_a_plain_run_keeps_the_counts_not_the_calls(tmp_path):
    out = tmp_path / "r.json"
    name = next(iter(OWN))
    _ops("test", "-b", "CANN-SIM", "--cases", _write_cases(tmp_path / "c.txt", [name]), "--results", str(out))
    cost = _costs(out)[name]
    assert "per_call" not in cost and cost["calls"] == 1 and cost["bytes_read"] == ADD[0]["bytes_read"]


def test_graph_capture_counts_calls_once_and_kernels_per_replay():
    """A model captured with two launches and replayed three times: two host calls, six
    kernels, the bytes of three replays (the events as the simulator gives them)."""
    rec = {"op": "aclnnAdd", "unit": "vector", "dtype": "float32", "flops": 10, "bytes_read": 80,
           "bytes_written": 40, "workspace": 0, "captured": True}
    replay = {"kernels": 2, "bytes_read": 160, "bytes_written": 80, "flops": {"cube": 0, "vector": 20}}
    events = [{"call": "aclnnAdd", "cost": rec}] * 2 + [{"call": "aclmdlRICaptureEnd", "cost": {"captured": 2}}] + \
        [{"call": "aclmdlRIExecuteAsync", "cost": {"replay": replay}}] * 3 + \
        [{"call": "aclrtSynchronizeStream", "cost": {"sync": 1}}]
    cost = summarise(events)
    assert (cost["calls"], cost["kernels"], cost["bytes_read"], cost["flops"]["vector"]) == (2, 6, 480, 60)
    assert cost["graph"] == {"captured": 1, "replays": 3} and cost["syncs"] == 1


# --- ggml-cann's test-backend-ops on the simulated toolkit -------------------------------

needs_ggml_cann = pytest.mark.skipif(not GGML_CANN.exists(), reason="make ggml-cann VARIANTS=910B has not run")


def _tbo_args(cases: dict) -> list[str]:
    ops = sorted({n.split("(")[0] for n in cases})
    args = ["-o", ",".join(ops)]
    for op in ops:
        params = [n[len(op) + 1:-1] for n in cases if n.startswith(op + "(")]
        args += ["-p", f"{op}=^(" + "|".join(p.replace("[", r"\[").replace("]", r"\]").replace(".", r"\.")
                                              .replace("(", r"\(").replace(")", r"\)") for p in params) + ")$"]
    return args


@pytest.fixture(scope="module")
def tbo_run(tmp_path_factory):
    if not GGML_CANN.exists():
        pytest.skip("make ggml-cann VARIANTS=910B has not run")
    d = tmp_path_factory.mktemp("tbo-cost")
    runs = []
    for jobs in ("1", "2"):
        out = d / f"r{jobs}.json"
        _ops("tbo", str(GGML_CANN), *_tbo_args(GGML_CANN_CASES), "--cost", "-j", jobs, "--results", str(out))
        runs.append(_costs(out))
    return runs


@needs_ggml_cann
@pytest.mark.parametrize("name", list(GGML_CANN_CASES))
def test_ggml_cann_counts_by_hand(tbo_run, name):
    check_counted(tbo_run[0][name], GGML_CANN_CASES[name])


@needs_ggml_cann
def test_ggml_cann_counts_are_the_same_across_workers(tbo_run):
    assert tbo_run[0] == tbo_run[1] and len(tbo_run[0]) == len(GGML_CANN_CASES)


@needs_ggml_cann
def test_trace_keeps_calls_without_the_count_records(tmp_path):
    out = tmp_path / "r.json"
    soft_max = {n: c for n, c in GGML_CANN_CASES.items() if n.startswith("SOFT_MAX")}
    _ops("tbo", str(GGML_CANN), *_tbo_args(soft_max), "--cost", "--trace", "--results", str(out))
    r = json.loads(out.read_text())["results"][0]
    assert [c["call"] for c in r["trace"] if c["call"].startswith("aclnn")] == ["aclnnMuls", "aclnnInplaceAdd",
                                                                                 "aclnnSoftmax"]
    assert all("args" in c for c in r["trace"]) and r["cost"]["calls"] == 3


def test_cost_is_refused_for_a_binary_off_the_simulator(tmp_path):
    fake = tmp_path / "test-backend-ops"
    fake.write_text("#!/bin/sh\necho 'Testing 1 devices'\necho 'Backend 1/1: CPU'\necho '  Device description: x'\n"
                    "echo '1/1 backends passed'\necho OK\n")
    fake.chmod(0o755)
    p = subprocess.run([*OPS, "tbo", str(fake), "-o", "ADD", "--cost"], capture_output=True, text=True, timeout=120,
                       env={k: v for k, v in os.environ.items() if not k.startswith("CANN_SIM")})
    assert p.returncode == 2 and "--cost" in p.stderr


def test_perf_on_the_simulator_heads_with_the_counted_work(tmp_path):
    """ops perf -b CANN-SIM: one compute's device work (counted in the timing's warm-up,
    without the harness's uploads), then the host's figures as the simulator's cost."""
    name = next(iter(OWN))
    out = tmp_path / "p.json"
    p = _ops("perf", "-b", "CANN-SIM", "--cases", _write_cases(tmp_path / "c.txt", [name]), "--min-time", "0.05",
             "--results", str(out))
    line = next(ln for ln in p.stdout.splitlines() if ln.strip().startswith("ADD("))
    assert line.index("1 call, 1 kernel, 12 kB") < line.index("host") < line.index("us/run (simulator's cost)")
    cost = _costs(out)[name]
    assert (cost["calls"], cost["kernels"], cost["bytes_read"], cost["bytes_written"]) == \
        (1, 1, ADD[0]["bytes_read"], ADD[0]["bytes_written"])
    assert cost["h2d"] == [0, 0] and cost["syncs"] == 1   # the compute alone: no upload, one sync
