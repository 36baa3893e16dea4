"""The wheel is the checkout (`make check-install`, which .ci/run calls after `make test`):
the wheel built from this tree, installed in a fresh virtual environment outside it, runs
from another folder every command `make test` covers on the simulator: ops test, perf,
support, repro on GGML-CPU and CANN-SIM (and the reproducer built and run), tbo on a fake
test-backend-ops, cases --from-gguf.

Building and installing takes a minute or more: these tests run when OPS_BUILD_TESTS is set."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

from _gguf_models import MODELS

ROOT = pathlib.Path(__file__).resolve().parents[1]
BARE = {"PATH": "/usr/bin:/bin"}
ABS = "ABS(type=f32,ne_a=[128,2,2,2],v=0)"
SOFT_MAX = ("SOFT_MAX(type=f32,ne=[16,16,1,1],mask=1,sinks=0,m_prec=f32,nr23=[1,1],scale=1.000000,"
            "max_bias=0.000000,inplace=0)")
# what would let the installed ops reach the checkout, or another build of it
NOT_PASSED = ("LD_LIBRARY_PATH", "CANNOPS_NATIVE", "GGML_HOME", "PYTHONPATH", "VIRTUAL_ENV", "ASCEND_TOOLKIT_HOME",
              "PYTHONHOME")

pytestmark = pytest.mark.skipif(not os.environ.get("OPS_BUILD_TESTS"),
                                reason="slow: set OPS_BUILD_TESTS=1 (make check-install)")


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(the venv's bin/, the environment to run it in, a folder outside the checkout)."""
    tmp = tmp_path_factory.mktemp("install")
    env = {k: v for k, v in os.environ.items() if k not in NOT_PASSED}
    p = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist"), str(ROOT)],
                       capture_output=True, text=True, env=env, timeout=3000)
    assert p.returncode == 0, p.stderr[-3000:]
    wheel, = (tmp / "dist").glob("cannops-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    p = subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(wheel)], capture_output=True, text=True,
                       env=env, timeout=3000)
    assert p.returncode == 0, p.stderr[-3000:]
    work = tmp / "work"
    work.mkdir()
    return venv / "bin", env, work


def ops(installed, *args, env=None, timeout=600):
    bin_, base, work = installed
    return subprocess.run([str(bin_ / "ops"), *args], capture_output=True, text=True, cwd=work, timeout=timeout,
                          env={**base, **(env or {})})


def ok(p, status=0):
    assert p.returncode == status, p.stdout[-3000:] + p.stderr[-3000:]
    assert "Traceback" not in p.stderr, p.stderr[-3000:]
    return p


def test_the_package_holds_its_native_modules_and_data(installed):
    site = next((installed[0].parent / "lib").glob("python3*/site-packages/cannops"))
    assert sorted(f.name.split(".")[0] for f in (site / "native").glob("_*.so")) == ["_aclnn", "_ggml"]
    assert (site / "native" / "repro" / "repro.h").is_file()
    assert sorted(p.stem for p in (site / "native" / "aclnn" / "api").glob("*.def")) == \
        sorted(p.stem for p in (ROOT / "native" / "aclnn" / "api").glob("*.def"))


def test_test_on_both_devices(installed):
    p = ok(ops(installed, "test", "-o", "ABS,MUL_MAT",
               "-p", r"^type=f32|^type_a=f32,type_b=f32,m=16,n=1,k=256,bs=\[1,1\],nr=\[1,1\]",
               "-b", "GGML-CPU,CANN-SIM"))
    assert "2/2 backends passed" in p.stdout


def test_perf_and_support(installed):
    p = ok(ops(installed, "perf", "-o", "ADD", "-b", "CANN-SIM", "--min-time", "0.01", "-p", r"nr=\[1,1,1,1\]"))
    assert any(ln.startswith("  ADD(") and "us/run" in ln for ln in p.stdout.splitlines()), p.stdout
    p = ok(ops(installed, "support", "-o", "ABS,SOFT_MAX", "-b", "CANN-SIM"))
    assert "ABS\tsupported (" in p.stdout, p.stdout


@pytest.fixture(scope="module")
def toolkit(installed):
    """The simulated toolkit, as an installed ops writes it."""
    prefix = installed[2] / "toolkit"
    p = subprocess.run([str(installed[0] / "python"), "-m", "cannops.backend.cann.sim.toolkit", str(prefix)],
                       capture_output=True, text=True, env=installed[1], cwd=installed[2], timeout=900)
    assert p.returncode == 0, p.stderr[-3000:]
    return {"ASCEND_TOOLKIT_HOME": str(prefix)}


@pytest.mark.parametrize("device", ["GGML-CPU", "CANN-SIM"])
def test_repro_writes_a_program_that_builds_and_reproduces(installed, toolkit, device):
    out = installed[2] / f"repro-{device}"
    env = toolkit if device == "CANN-SIM" else {}
    ok(ops(installed, "repro", "-b", device, SOFT_MAX, str(out), env=env))
    assert json.loads((out / "repro.json").read_text())["status"] == "OK"
    for target in ([], ["run"]):
        p = subprocess.run(["make", "-s", *target], cwd=out, capture_output=True, text=True, env={**BARE, **env},
                           timeout=600)
        assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    assert "reproduced:" in p.stdout


def test_repro_on_cann_sim_without_a_toolkit_says_how_to_get_one(installed):
    out = installed[2] / "repro-no-toolkit"
    ok(ops(installed, "repro", "-b", "CANN-SIM", ABS, str(out)))
    p = subprocess.run(["make", "-s"], cwd=out, capture_output=True, text=True, env=BARE, timeout=600)
    assert p.returncode != 0 and "python -m cannops.backend.cann.sim.toolkit DIR" in p.stderr, p.stderr


def test_tbo_on_a_fake_binary(installed):
    from test_tbo import CASES, FAKE     # the fake test-backend-ops of ops tbo's own tests
    build = installed[2] / "build"
    (build / "bin").mkdir(parents=True)
    exe = build / "bin" / "test-backend-ops"
    exe.write_text(f"#!{sys.executable}\n" + FAKE)
    exe.chmod(0o755)
    (build / "bin" / "cases.json").write_text(json.dumps(CASES))
    (build / "source.json").write_text(json.dumps({"kind": "release", "name": "llama-cpp-python==0.3.36",
                                                   "ggml_version": "0.25.3", "variant": "910B"}))
    res = installed[2] / "tbo.json"
    ok(ops(installed, "tbo", str(exe), "-o", "ABS", "--results", str(res)))
    doc = json.loads(res.read_text())
    assert sorted((r["op"], r["status"]) for r in doc["results"]) == [("ABS", "OK"), ("ABS", "OK")]


def test_cases_from_a_gguf(installed):
    path = MODELS["llama"](installed[2] / "llama.gguf")
    p = ok(ops(installed, "cases", "--from-gguf", path))
    names = p.stdout.splitlines()
    assert any(n.startswith("MUL_MAT(") for n in names) and any(n.startswith("ROPE(") for n in names), names
