"""`ops repro`: the folder it writes, and its standalone C program built and run with no
Python on PATH (env -i PATH=/usr/bin:/bin): `make run` exits 0 when the stored device
outputs reproduce byte for byte, 1 when they do not (a stored output perturbed, as a fixed
device would give), and bad input is one line and exit 2 before any work."""
import json
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest

OPS = [sys.executable, "-m", "cannops.cli.main"]
BARE = {"PATH": "/usr/bin:/bin"}     # no Python on the program's PATH
SOFT_MAX = ("SOFT_MAX(type=f32,ne=[16,16,1,1],mask=1,sinks=0,m_prec=f32,nr23=[1,1],scale=1.000000,"
            "max_bias=0.000000,inplace=0)")
ABS = "ABS(type=f16,ne_a=[5,7,11,13],v=0)"

pytestmark = pytest.mark.skipif(shutil.which("cc") is None or shutil.which("make") is None,
                                reason="needs a C compiler and make")


def ops(*args, env=None, timeout=600):
    return subprocess.run([*OPS, *args], capture_output=True, text=True, timeout=timeout,
                          env=None if env is None else {**os.environ, **env})


def make(folder, *targets, env=BARE):
    return subprocess.run(["make", "-s", *targets], cwd=folder, capture_output=True, text=True, env=env,
                          timeout=600)


def repro(tmp_path, device, *cases, env=None, name="r"):
    out = tmp_path / name
    p = ops("repro", "-b", device, *cases, str(out), env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    return out, json.loads((out / "repro.json").read_text())


def built_and_run(out):
    p = make(out)
    assert p.returncode == 0, p.stdout + p.stderr
    return make(out, "run")


def perturb(out, manifest):
    """The compared output's stored bytes with one byte changed: a device that now computes
    something else."""
    path = out / sorted(f for f in manifest["files"] if f.startswith(f"case{len(manifest['cases'])}/")
                        and f.endswith(".bytes.npy"))[0]
    stored = np.load(path)
    stored[len(stored) // 2] ^= 0x40
    np.save(path, stored)


@pytest.mark.parametrize("case", [SOFT_MAX, ABS])
def test_a_ggml_cpu_reproducer_builds_and_reproduces_without_python(tmp_path, case):
    out, manifest = repro(tmp_path, "GGML-CPU", case)
    assert manifest["cases"] == [case] and manifest["device"] == "GGML-CPU" and manifest["status"] == "OK"
    assert {"README.md", "Makefile", "repro.c", "repro.h", "trace.json"} <= set(manifest["files"])
    assert "ggml_new_tensor(ctx, GGML_TYPE_" in (out / "repro.c").read_text()
    run = built_and_run(out)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "identical to the stored device output" in run.stdout and "reproduced:" in run.stdout
    assert "vs the reference: NMSE = " in run.stdout and "(OK)" in run.stdout
    readme = (out / "README.md").read_text()
    assert case in readme and "make run" in readme and "## Versions" in readme

    perturb(out, manifest)
    run = subprocess.run(["./repro"], cwd=out, capture_output=True, text=True, env=BARE, timeout=300)
    assert run.returncode == 1 and "NOT reproduced" in run.stdout and "differs from the stored" in run.stdout


def test_a_tensor_is_renamed_in_the_run_and_the_program(tmp_path):
    out, manifest = repro(tmp_path, "GGML-CPU", "--name", "a=blk.0.attn_q.weight", ABS)
    assert 'ggml_set_name(t0, "blk.0.attn_q.weight");' in (out / "repro.c").read_text()
    assert "`a` is `blk.0.attn_q.weight`" in (out / "README.md").read_text()
    assert built_and_run(out).returncode == 0


def test_several_cases_run_in_order_and_the_last_is_compared(tmp_path):
    out, manifest = repro(tmp_path, "GGML-CPU", "--after", ABS, SOFT_MAX)
    assert manifest["cases"] == [ABS, SOFT_MAX] and manifest["compared"] == SOFT_MAX
    text = (out / "repro.c").read_text()
    assert "static int case_1(" in text and "static int case_2(" in text
    run = built_and_run(out)
    assert run.returncode == 0 and run.stdout.count("identical to the stored") == 1, run.stdout


def test_a_folder_written_before_is_rewritten_and_nothing_else_is_touched(tmp_path):
    out, first = repro(tmp_path, "GGML-CPU", ABS)
    (out / "notes.txt").write_text("mine")
    _, manifest = repro(tmp_path, "GGML-CPU", SOFT_MAX)
    assert manifest["cases"] == [SOFT_MAX] and (out / "notes.txt").read_text() == "mine"
    gone = set(first["files"]) - set(manifest["files"])
    assert gone and not any((out / f).exists() for f in gone)


@pytest.mark.parametrize("args, message", [
    (["-b", "GGML-CPU", "NOT_AN_OP(type=f32)"], "unknown op"),
    (["-b", "GGML-CPU", "ABS"], "whole case names"),
    (["-b", "NO-SUCH-DEVICE", ABS], "not available here"),
    (["-b", "NUMPY", ABS], "cannot reproduce NUMPY"),
    (["-b", "GGML-CPU", ABS, "{foreign}"], "not written by ops repro"),
    (["-b", "GGML-CPU", "--name", "z=blk.0.attn_q.weight", ABS], "has no tensor named 'z'"),
    (["-b", "GGML-CPU", "--name", "a", ABS], "--name takes LEAF=NAME"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_work(tmp_path, args, message):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "keep.txt").write_text("x")
    args = [a.format(foreign=foreign) for a in args]
    if "{foreign}" not in " ".join(args) and str(foreign) not in args:
        args.append(str(tmp_path / "out"))
    p = ops("repro", *args)
    assert p.returncode == 2 and message in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "out").exists() and sorted(os.listdir(foreign)) == ["keep.txt"]


# ---------------------------------------------------------------- GGML-CANN0 ----

ROOT = pathlib.Path(__file__).resolve().parents[1]
GGML_CANN = pathlib.Path(os.environ.get("OPS_TEST_GGML_CANN", ROOT / "build" / "ggml-cann" / "910B"))
SET_ROWS = "SET_ROWS(type_src=f16,type_dst=f32,type_idx=i64,ne=[256,5,1,3],nr23=[1,1],r=1,v=0)"
SWIGLU_VIEW = "SWIGLU(type=f16,ne_a=[128,2,2,2],v=1,swapped=0)"
MUL_MAT_F32 = ("MUL_MAT(type_a=f32,type_b=f32,m=16,n=1,k=256,bs=[1,1],nr=[1,1],per=[0,1,2,3],k_v=0,o=1,"
               "src_overlap=0,m_v=0,pad=0)")
# ops with the bridge of a test folder (built against the ggml-cann prefix) in place of its own
LAUNCH = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("cannops.native._ggml", sys.argv.pop(1))
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
sys.modules["cannops.native._ggml"] = mod
from cannops.cli.main import main
main()
"""


def _env_sh(path: pathlib.Path) -> dict:
    return dict(line[len("export "):].split("=", 1) for line in path.read_text().splitlines()
                if line.startswith("export "))


@pytest.fixture(scope="module")
def ggml_cann(tmp_path_factory):
    """(the bridge built against a `make ggml-cann` build's prefix, its env.sh); skipped
    where no such build is here (`make ggml-cann VARIANTS=910B`)."""
    if not (GGML_CANN / "prefix" / "lib" / "libggml-cann.so").exists():
        pytest.skip(f"no ggml-cann build at {GGML_CANN} (make ggml-cann VARIANTS=910B)")
    tmp = tmp_path_factory.mktemp("bridge")
    build = ("import os; os.environ['GGML_HOME'] = %r\nfrom cannops.native import build_ggml\n"
             "print(build_ggml.make_ffi().compile(tmpdir=%r, target=None))" % (str(GGML_CANN / "prefix"), str(tmp)))
    p = subprocess.run([sys.executable, "-c", build], capture_output=True, text=True, timeout=1200)
    assert p.returncode == 0, p.stderr[-2000:]
    return p.stdout.strip().splitlines()[-1], _env_sh(GGML_CANN / "env.sh")


def repro_cann0(ggml_cann, *args: str) -> subprocess.CompletedProcess:
    """`ops repro -b GGML-CANN0 ARGS...` with the bridge built on the ggml-cann prefix."""
    module, env = ggml_cann
    return subprocess.run([sys.executable, "-c", LAUNCH, module, "repro", "-b", "GGML-CANN0", *args],
                          capture_output=True, text=True, timeout=600, env={**os.environ, **env})


def test_a_ggml_cann_fault_reproduces_without_python(tmp_path, ggml_cann):
    """ggml-cann's SET_ROWS f16 -> f32 (docs/ggml-cann-on-cann-sim.md) FAILs in ops; the
    reproducer, against the same ggml-cann on the simulated toolkit, gives the same bytes."""
    _, env = ggml_cann
    out = tmp_path / "set_rows"
    p = repro_cann0(ggml_cann, SET_ROWS, str(out))
    assert p.returncode == 0 and "FAIL" in p.stdout, p.stdout + p.stderr
    manifest = json.loads((out / "repro.json").read_text())
    assert manifest["status"] == "FAIL" and manifest["versions"]["ggml"] == "0.25.3"
    assert "ggml_set_rows(ctx, " in (out / "repro.c").read_text()
    assert any(c["call"] == "aclnnInplaceIndexCopy" for c in json.loads((out / "trace.json").read_text())[0]["calls"])
    run = built_and_run(out)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "identical to the stored device output" in run.stdout and "(FAIL)" in run.stdout
    perturb(out, manifest)
    run = subprocess.run(["./repro"], cwd=out, capture_output=True, text=True, env={**BARE, **env}, timeout=300)
    assert run.returncode == 1 and "NOT reproduced" in run.stdout, run.stdout + run.stderr


def expect_death(out, sig: int, code: int, message: str) -> None:
    """The program rewritten as ops repro writes it for a run that killed its process."""
    text = (out / "repro.c").read_text()
    defines = (f'#define EXPECT_DEATH "the last case"\n#define EXPECT_SIGNAL {sig}\n#define EXPECT_EXIT {code}\n'
               f'#define EXPECT_MESSAGE "{message}"\n')
    (out / "repro.c").write_text(text.replace("#define N_THREADS", defines + "#define N_THREADS", 1))
    (out / "repro").unlink(missing_ok=True)


def test_a_program_expecting_a_death_tells_the_death_from_a_run_to_the_end(tmp_path):
    """repro.h's repro_expect_death, on GGML-CPU: the cases run in a child; the same end
    (here exit 2 on a missing input, with its line) is reproduced, a run to the end is not."""
    out, _ = repro(tmp_path, "GGML-CPU", ABS)
    expect_death(out, 0, 2, "repro: cannot open case1/in_0")
    (out / "case1" / next(f for f in os.listdir(out / "case1") if f.startswith("in_0"))).unlink()
    run = built_and_run(out)
    assert run.returncode == 0 and "dies as in the recorded run (exit status 2)" in run.stdout, run.stdout
    out, _ = repro(tmp_path, "GGML-CPU", ABS, name="computes")
    expect_death(out, 6, 0, "CANN error: ")
    assert make(out).returncode == 0
    run = subprocess.run(["./repro"], cwd=out, capture_output=True, text=True, env=BARE, timeout=300)
    assert run.returncode == 1 and "NOT reproduced: the last case ran to its end, exit status 0" in run.stdout, run.stdout
    assert "identical to the stored device output" in run.stdout   # the child's output passed on


def test_a_ggml_cann_abort_leaves_a_program_that_sees_it_again(tmp_path, ggml_cann):
    """ggml-cann aborts the process on the refused aclnnSwiGlu of a view: ops repro (the
    device in a child) still writes the folder, and its program dies the same way."""
    _, env = ggml_cann
    out = tmp_path / "swiglu"
    p = repro_cann0(ggml_cann, SWIGLU_VIEW, str(out))
    assert p.returncode == 0 and "killed by SIGABRT" in p.stdout, p.stdout + p.stderr
    manifest = json.loads((out / "repro.json").read_text())
    assert manifest["status"] == "FAIL" and manifest["died"]["exitcode"] == -6
    assert manifest["died"]["expected"].startswith("CANN error: aclnnSwiGluGetWorkspaceSize: x must be contiguous")
    assert not [f for f in manifest["files"] if f.startswith("case1/out_")]
    readme = (out / "README.md").read_text()
    assert "## What happened" in readme and "No output: the device's process died" in readme
    run = built_and_run(out)
    assert run.returncode == 0 and "dies as in the recorded run (killed by SIGABRT)" in run.stdout, run.stdout
    text = (out / "repro.c").read_text()
    (out / "repro.c").write_text(text.replace("x must be contiguous", "x must be something else"))
    assert make(out).returncode == 0
    run = subprocess.run(["./repro"], cwd=out, capture_output=True, text=True, env={**BARE, **env}, timeout=300)
    assert run.returncode == 1 and "NOT reproduced" in run.stdout, run.stdout


ROPE_OVERRUN_SECOND = ("ROPE(type=f32,ne_a=[256,8,512,1],n_dims=256,mode=2,n_ctx=512,fs=1.000000,ef=0.000000,"
                       "af=1.000000,ff=0,v=0,inplace=0,n_offs=0)")


def test_the_rope_overrun_s_second_case_alone_reproduces_and_its_program_allocates_as_ggml_does(tmp_path, ggml_cann):
    """The ROPE cache overrun's second case alone computes (docs/upstream/rope-cache-overrun.md:
    the overrun needs the first); its program reproduces it with `make run`. Without the
    Makefile's CANN_SIM_MALLOC_ALIGN=128 it dies in ggml-alloc as test-backend-ops would:
    ggml_backend_alloc_ctx_tensors sizes the buffer as if its base were aligned to ggml-cann's
    128 bytes (docs/upstream/buffer-alignment-128.md), and the program keeps that call."""
    _, env = ggml_cann
    out = tmp_path / "rope"
    p = repro_cann0(ggml_cann, "--catalog", "0.25.3", ROPE_OVERRUN_SECOND, str(out))
    assert p.returncode == 0 and p.stdout.rstrip().splitlines()[-2].endswith(": OK"), p.stdout + p.stderr
    run = built_and_run(out)
    assert run.returncode == 0 and "reproduced: the device's outputs are the stored ones" in run.stdout, run.stdout
    unaligned = {**BARE, "GGML_NO_BACKTRACE": "1", **{k: v for k, v in env.items() if k != "CANN_SIM_MALLOC_ALIGN"}}
    run = subprocess.run(["./repro"], cwd=out, capture_output=True, text=True, env=unaligned, timeout=300)
    assert run.returncode != 0 and "not enough space in the buffer" in run.stdout + run.stderr, run.stdout + run.stderr


def test_an_f32_weight_named_like_a_model_weight_aborts_ggml_cann(tmp_path, ggml_cann):
    """docs/upstream/nz-f32-weights.md: with the weight named blk.0.attn_q.weight, ggml-cann
    (GGML_CANN_WEIGHT_NZ on by default) sizes it for NZ with aclnnCalculateMatmulWeightSizeV2,
    which refuses FLOAT; with its own name the same case computes."""
    for name, args in (("nz", ["--name", "a=blk.0.attn_q.weight"]), ("nd", [])):
        p = repro_cann0(ggml_cann, "--catalog", "0.25.3", *args, MUL_MAT_F32, str(tmp_path / name))
        assert p.returncode == 0, p.stdout + p.stderr
    died = json.loads((tmp_path / "nz" / "repro.json").read_text())["died"]
    assert died["message"].startswith("CANN error: aclnnCalculateMatmulWeightSizeV2: dataType FLOAT")
    assert "died" not in json.loads((tmp_path / "nd" / "repro.json").read_text())
    run = built_and_run(tmp_path / "nz")
    assert run.returncode == 0 and "dies as in the recorded run" in run.stdout, run.stdout


# ------------------------------------------------------------------ CANN-SIM ----

@pytest.fixture(scope="module")
def toolkit(tmp_path_factory):
    """The simulated toolkit (make cann-sim-toolkit), built for these tests."""
    from cannops.backend.cann.sim import toolkit as sim_toolkit
    prefix = tmp_path_factory.mktemp("toolkit")
    sim_toolkit.build(prefix)
    return {"ASCEND_TOOLKIT_HOME": str(prefix)}


def cann_repro(tmp_path, toolkit, case, fault="", recorder=""):
    env = {**toolkit, "OPS_CANN_FAULT": fault, "OPS_REPRO_RECORDER": recorder}
    out, manifest = repro(tmp_path, "CANN-SIM", case, env=env, name=f"{fault or 'r'}-{recorder or 'sim'}")
    p = make(out, env={**BARE, **toolkit})
    assert p.returncode == 0, p.stdout + p.stderr
    return out, manifest, make(out, "run", env={**BARE, **toolkit})


def test_a_cann_sim_reproducer_makes_the_aclnn_calls_in_c_without_python(tmp_path, toolkit):
    out, manifest, run = cann_repro(tmp_path, toolkit, SOFT_MAX)
    assert manifest["status"] == "OK" and manifest["versions"]["soc"].startswith("Ascend")
    text = (out / "repro.c").read_text()
    for call in ("aclnnMulsGetWorkspaceSize(", "aclnnSoftmax(workspace(ws), ws, executor, stream)", "aclrtMalloc(&m0",
                 "synchronize();", '#include "aclnnop/aclnn_softmax.h"'):
        assert call in text
    calls = [c["call"] for c in json.loads((out / "trace.json").read_text())[0]["calls"]]
    assert calls.count("aclnnSoftmax") == 1 and "aclrtMemcpy" in calls
    assert run.returncode == 0 and "identical to the stored device output" in run.stdout, run.stdout + run.stderr
    assert "(OK)" in run.stdout and "reproduced:" in run.stdout
    perturb(out, manifest)
    run = subprocess.run(["./repro"], cwd=out, capture_output=True, text=True, env={**BARE, **toolkit}, timeout=300)
    assert run.returncode == 1 and "NOT reproduced" in run.stdout, run.stdout + run.stderr


def test_a_planted_fault_is_reproduced_with_its_wrong_output(tmp_path, toolkit):
    """softmax-bf16-logits (docs/trace-and-blame.md) makes the logits scratch BF16: the
    program makes that call, with no fault set, and gets the same wrong bytes."""
    out, manifest, run = cann_repro(tmp_path, toolkit, SOFT_MAX, "softmax-bf16-logits")
    assert manifest["status"] == "FAIL" and "NMSE" in manifest["reason"]
    readme = (out / "README.md").read_text()
    assert "Blame" in readme and "aclnnMuls (call 1 of 3" in readme and "> #1 aclnnMuls(" in readme
    assert "aclnnMulsGetWorkspaceSize" in (out / "repro.c").read_text() and "ACL_BF16" in (out / "repro.c").read_text()
    assert run.returncode == 0 and "(FAIL)" in run.stdout and "identical to the stored" in run.stdout, run.stdout
    ok, _, _ = cann_repro(tmp_path, toolkit, SOFT_MAX)   # the layer without the fault: other bytes
    assert np.load(out / "case1/out_2.bytes.npy").tobytes() != np.load(ok / "case1/out_2.bytes.npy").tobytes()


def test_a_refused_call_is_reproduced_as_the_refusal(tmp_path, toolkit):
    out, manifest, run = cann_repro(tmp_path, toolkit, SOFT_MAX, "softmax-bad-dim")
    assert manifest["status"] == "FAIL" and "161002" in manifest["reason"]
    assert run.returncode == 0 and "aclnnSoftmaxGetWorkspaceSize returned 161002, as in the run" in run.stdout, \
        run.stdout + run.stderr


@pytest.mark.parametrize("fault", ["", "softmax-bf16-logits", "softmax-bad-dim"])
def test_the_layers_own_recording_writes_the_same_program_and_it_reproduces(tmp_path, toolkit, fault):
    """As on a real NPU (CANN0), the layer records the run itself (native/aclnn/trace.c,
    OPS_REPRO_RECORDER=native): through the simulated toolkit, the program written from its
    recording is the one written from the simulator's, but for the run's addresses (in its
    comments), with the same uploads, and it reproduces the same way."""
    import re
    sim, sim_manifest, _ = cann_repro(tmp_path, toolkit, SOFT_MAX, fault)
    out, manifest, run = cann_repro(tmp_path, toolkit, SOFT_MAX, fault, recorder="native")
    assert manifest["status"] == sim_manifest["status"] and manifest["files"] == sim_manifest["files"]
    assert "native/aclnn/trace.c" in manifest["recorded_by"] and "sim/trace.py" in sim_manifest["recorded_by"]

    def text(folder):
        return re.sub(r"0x[0-9a-f]+", "ADDR", (folder / "repro.c").read_text()).replace(folder.name, "")
    assert text(out) == text(sim)
    copies = sorted(f for f in manifest["files"] if "/copy_" in f)
    assert copies and all((out / f).read_bytes() == (sim / f).read_bytes() for f in copies)
    assert run.returncode == 0 and "reproduced:" in run.stdout, run.stdout + run.stderr
    if not fault:
        # a newer toolkit's operator libraries, one per repository, are linked instead of libopapi
        (tmp_path / "split" / "lib64").mkdir(parents=True)
        for name in ("libopapi_nn.so", "libopapi_math.so"):
            (tmp_path / "split" / "lib64" / name).write_bytes(b"")
        dry = make(out, "-n", "-B", f"ASCEND_TOOLKIT_HOME={tmp_path / 'split'}")
        assert "-lnnopbase -lopapi_math -lopapi_nn -lm" in dry.stdout, dry.stdout + dry.stderr
        perturb(out, manifest)
        again = subprocess.run(["./repro"], cwd=out, capture_output=True, text=True, env={**BARE, **toolkit},
                               timeout=300)
        assert again.returncode == 1 and "NOT reproduced" in again.stdout, again.stdout + again.stderr


def test_a_death_is_not_explained_by_ggml_cann_s_refused_second_acl_init():
    from cannops.cli.engine.repro_run import _why
    start = "CANN-SIM refused: aclInit: only once per process"
    assert _why([start, "ggml-alloc: not enough space in the buffer"]) == "ggml-alloc: not enough space in the buffer"
    assert _why([start, "CANN-SIM refused: aclnnSwiGlu: x is not contiguous", "abort"]) == \
        "CANN-SIM refused: aclnnSwiGlu: x is not contiguous"
