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
    run = make(out, "run")
    assert run.returncode != 0 and "NOT reproduced" in run.stdout and "differs from the stored" in run.stdout


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
    (["-b", "NUMPY", ABS], "not for NUMPY"),
    (["-b", "GGML-CPU", ABS, "{foreign}"], "not written by ops repro"),
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
