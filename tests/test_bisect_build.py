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


def _history(root):
    """The vendored tree, then nine commits: notes, a commit that does not compile (3) and
    its fix (4), a wrong SCALE factor planted (5), the factor set right again (8). git's
    first steps are fixed by the history's shape (tests/test_bisect.py's judge walks the
    same): the first bisection meets the broken commit."""
    tree = ggml_sources.llama_cpp()
    repo = root / "llama.cpp"
    (repo / "tests").mkdir(parents=True)
    shutil.copytree(tree / "ggml", repo / "ggml")
    shutil.copy(tree / "tests" / "test-backend-ops.cpp", repo / "tests")
    ops_cpp = repo / "ggml" / "src" / "ggml-cann" / "aclnn_ops.cpp"
    tensor_cpp = repo / "ggml" / "src" / "ggml-cann" / "acl_tensor.cpp"
    assert ops_cpp.read_text().count(SCALE_LINE) == 1
    broken = "\n#error planted: this commit does not build\n"
    steps = {
        3: ("acl_tensor: a change that does not compile", tensor_cpp, None, broken),
        4: ("acl_tensor: compiles again", tensor_cpp, broken, ""),
        5: ("ggml-cann: scale by the op's factor (#4242)", ops_cpp, SCALE_LINE, PLANT),
        8: ("ggml-cann: SCALE back to the op's factor (#4343)", ops_cpp, PLANT, SCALE_LINE),
    }
    git(repo, "init", "-q", "-b", "master")
    commits = [_commit(repo, "import the vendored tree")]
    for i in range(1, 10):
        what, path, old, new = steps.get(i, (f"docs: note {i}", repo / f"NOTES-{i}.md", None, f"note {i}\n"))
        text = path.read_text() if path.exists() else ""
        path.write_text(text + new if old is None else text.replace(old, new))
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


def _steps(out: str) -> list[str]:
    return [ln for ln in out.splitlines() if re.match(r"\s+(end|\d+)\s+[0-9a-f]{12}", ln)]


def test_bisect_both_ways_on_one_history(ready, tmp_path):
    repo, commits = _history(tmp_path)
    before = snapshot(repo)
    work = tmp_path / "work"
    r = _bisect(repo, commits[0], commits[7], work)
    print(r.stdout, r.stderr)
    assert r.returncode == 0, r.stderr
    assert f"first bad commit: {commits[5]} ggml-cann: scale by the op's factor (#4242) (llama.cpp #4242)" in r.stdout
    # git asked about the broken commit: skipped, never judged
    broken = [ln for ln in _steps(r.stdout) if commits[3][:12] in ln]
    assert broken and all("skip (does not build" in ln for ln in broken), r.stdout
    # the same command again resumes: every verdict known, nothing built
    again = _bisect(repo, commits[0], commits[7], work)
    assert again.returncode == 0 and "judged already" in again.stdout and commits[5] in again.stdout
    assert len(_steps(again.stdout)) == len(_steps(r.stdout))
    assert all("[judged before]" in ln for ln in _steps(again.stdout))
    # the other way, on the same clone and build: which commit fixed it
    fixed = _bisect(repo, commits[5], commits[9], work, "--fixed")
    print(fixed.stdout, fixed.stderr)
    assert fixed.returncode == 0, fixed.stderr
    assert f"first fixed commit: {commits[8]}" in fixed.stdout
    # the commits the first bisection judged are not built again
    again_seen = [ln for ln in _steps(fixed.stdout) if commits[7][:12] in ln or commits[5][:12] in ln]
    assert again_seen and all("[judged before]" in ln for ln in again_seen), fixed.stdout
    assert snapshot(repo) == before
