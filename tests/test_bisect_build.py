"""`ops bisect` end to end with real builds (`make bisect-check`, a .ci/run step; it needs the
simulated toolkit and the pinned llama-cpp-python sdist, and several minutes): a git
history made here from the vendored llama.cpp's ggml (ten commits, one of them planting a
wrong scale into ggml-cann's SCALE, one that does not compile, fixed by the next), then
bisected both ways. The user's checkout is byte-identical afterwards."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

from cannops.native import cann_sim_toolkit, ggml_cann_build, ggml_sources

from test_bisect import git, snapshot

pytestmark = pytest.mark.skipif(os.environ.get("OPS_BISECT_BUILD") != "1",
                                reason="builds ggml-cann at each step: make bisect-check")

SCALE_LINE = "memcpy(&v, dst->op_params, sizeof(float));"
PLANT = SCALE_LINE + " v *= 1.5f;  // planted"


def _history(root, fault_at: int | None, fixed_at: int | None):
    """The vendored tree, then nine commits: notes, a commit that does not compile (4) and
    its fix (5), the fault planted (fault_at) or removed (fixed_at)."""
    tree = ggml_sources.llama_cpp()
    repo = root / "llama.cpp"
    (repo / "tests").mkdir(parents=True)
    shutil.copytree(tree / "ggml", repo / "ggml")
    shutil.copy(tree / "tests" / "test-backend-ops.cpp", repo / "tests")
    ops_cpp = repo / "ggml" / "src" / "ggml-cann" / "aclnn_ops.cpp"
    tensor_cpp = repo / "ggml" / "src" / "ggml-cann" / "acl_tensor.cpp"
    assert ops_cpp.read_text().count(SCALE_LINE) == 1
    if fixed_at is not None:
        ops_cpp.write_text(ops_cpp.read_text().replace(SCALE_LINE, PLANT))
    git(repo, "init", "-q", "-b", "master")
    commits = [_commit(repo, "import the vendored tree")]
    for i in range(1, 10):
        if i == fault_at:
            ops_cpp.write_text(ops_cpp.read_text().replace(SCALE_LINE, PLANT))
            what = "ggml-cann: scale by the op's factor (#4242)"
        elif i == fixed_at:
            ops_cpp.write_text(ops_cpp.read_text().replace(PLANT, SCALE_LINE))
            what = "ggml-cann: SCALE back to the op's factor (#4343)"
        elif i == 4:
            tensor_cpp.write_text(tensor_cpp.read_text() + "\n#error planted: this commit does not build\n")
            what = "acl_tensor: a change that does not compile"
        elif i == 5:
            tensor_cpp.write_text(tensor_cpp.read_text().replace(
                "\n#error planted: this commit does not build\n", ""))
            what = "acl_tensor: compiles again"
        else:
            (repo / f"NOTES-{i}.md").write_text(f"note {i}\n")
            what = f"docs: note {i}"
        commits.append(_commit(repo, what))
    return repo, commits


def _commit(repo, message) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def _bisect(repo, old, new, work, *more) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "cannops.cli.main", "bisect", str(repo), old, new, "-o", "SCALE",
           "--work", str(work), *more]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=3600)


@pytest.fixture(scope="module")
def ready():
    if not cann_sim_toolkit.is_simulated(ggml_cann_build.TOOLKIT):
        pytest.fail("make cann-sim-toolkit first (make bisect-check does)")


def test_bisect_names_the_planted_commit(ready, tmp_path):
    repo, commits = _history(tmp_path, fault_at=7, fixed_at=None)
    before = snapshot(repo)
    r = _bisect(repo, commits[0], commits[-1], tmp_path / "work")
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    assert f"first bad commit: {commits[7]} ggml-cann: scale by the op's factor (#4242) (llama.cpp #4242)" in r.stdout
    steps = [ln for ln in r.stdout.splitlines() if re.match(r"\s+(end|\d+)\s+[0-9a-f]{12}", ln)]
    assert any(commits[4][:12] in ln and "skip (does not build" in ln for ln in steps) or \
        all(commits[4][:12] not in ln for ln in steps)
    assert snapshot(repo) == before
    # the same command again resumes: every verdict known, nothing built
    again = _bisect(repo, commits[0], commits[-1], tmp_path / "work")
    assert again.returncode == 0 and "resuming" in again.stdout and commits[7] in again.stdout
    assert all(" build     0 s" in ln for ln in again.stdout.splitlines() if re.match(r"\s+\d+\s", ln))


def test_bisect_fixed_names_the_fixing_commit_skipping_the_broken_one(ready, tmp_path):
    repo, commits = _history(tmp_path, fault_at=None, fixed_at=6)
    before = snapshot(repo)
    r = _bisect(repo, commits[0], commits[-1], tmp_path / "work", "--fixed")
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    assert f"first fixed commit: {commits[6]}" in r.stdout
    assert snapshot(repo) == before
