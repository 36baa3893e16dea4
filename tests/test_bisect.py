"""`ops bisect`: git's bisection in a private clone, judged step by step; the user's
checkout unchanged; bad input refused before any work. The judge here reads the step's
checkout (a fault file, a file that breaks the build), so no build is needed; the real
build over a vendored ggml tree is tests/test_bisect_build.py."""
from __future__ import annotations

import hashlib
import re
import os
import pathlib
import subprocess

import click
import pytest

from cannops.cli import bisect as B
from cannops.cli.engine import BadInput


def git(repo, *args) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def history(tmp_path, steps: list[dict[str, str | None]]) -> tuple[pathlib.Path, list[str]]:
    """A repository with one commit per step: each step's files written (None: removed)."""
    repo = tmp_path / "user"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "master")
    (repo / "tests").mkdir()
    (repo / "tests" / "test-backend-ops.cpp").write_text("// test-backend-ops\n")
    commits = []
    for i, files in enumerate(steps):
        for name, text in files.items():
            if text is None:
                (repo / name).unlink()
            else:
                (repo / name).write_text(text)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "--allow-empty", "-m", f"step {i}: {', '.join(files) or 'nothing'} (#{1000 + i})")
        commits.append(git(repo, "rev-parse", "HEAD"))
    return repo, commits


def snapshot(root: pathlib.Path) -> dict[str, str]:
    """Every file under root (.git included) by its bytes' digest."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


class FileJudge:
    """A step is bad where the file `fault` holds "on", skipped where `broken` exists."""

    def __init__(self, clone: pathlib.Path):
        self.clone, self.seen = clone, []

    def __call__(self, commit: str) -> B.Verdict:
        self.seen.append(commit)
        if (self.clone / "broken").exists():
            return B.Verdict(B.SKIP, "does not build")
        fault = (self.clone / "fault").read_text().strip() if (self.clone / "fault").exists() else ""
        return B.Verdict(B.BAD if fault == "on" else B.GOOD)


def run_bisect(repo, work, old, new, fixed=False, judge_type=FileJudge, known=None, paths=()):
    bis = B.Bisection(repo, work, old, new, fixed, {"cases": "file judge"}, paths)
    known = bis.prepare() if known is None else known
    judge = judge_type(bis.clone)
    lines = []
    try:
        first, left = B.bisect(bis, known, judge, lines.append)
    finally:
        bis.end()
    return first, left, judge, lines


TEN = [{"a": "0"}, {"a": "1"}, {"b": "2"}, {"fault": "off"}, {"c": "4"}, {"fault": "on"},
       {"d": "6"}, {"e": "7"}, {"f": "8"}, {"g": "9"}]


def test_finds_the_planted_commit_and_leaves_the_checkout_as_it_was(tmp_path):
    repo, commits = history(tmp_path, TEN)
    (repo / "uncommitted").write_text("the user's work in progress")
    before = snapshot(repo)
    first, left, judge, lines = run_bisect(repo, tmp_path / "work", commits[0], commits[-1])
    assert first == commits[5] and left == []
    assert len(judge.seen) <= 2 + 4      # the two ends and log2(9) steps
    assert snapshot(repo) == before
    assert B.pr_number(B.subject(repo, first)) == "1005"
    assert any(commits[5][:12] in line and "bad" in line for line in lines)


def test_only_commits_touching_the_paths_are_steps(tmp_path):
    steps = [{"a": "0"}, {"fault": "off"}, {"a": "2"}, {"b": "3"}, {"fault": "on"}, {"c": "5"}, {"d": "6"},
             {"e": "7"}, {"f": "8"}]
    repo, commits = history(tmp_path, steps)
    first, _, judge, _ = run_bisect(repo, tmp_path / "work", commits[0], commits[-1], paths=("fault",))
    assert first == commits[4]
    # the ends, then only the commits that touch `fault` (1 and 4)
    assert set(judge.seen) <= {commits[0], commits[-1], commits[1], commits[4]}


def test_fixed_finds_the_commit_that_removed_the_fault(tmp_path):
    steps = [{"fault": "on"}, {"a": "1"}, {"b": "2"}, {"c": "3"}, {"fault": "off"}, {"d": "5"}, {"e": "6"}]
    repo, commits = history(tmp_path, steps)
    first, _, _, _ = run_bisect(repo, tmp_path / "work", commits[0], commits[-1], fixed=True)
    assert first == commits[4]


def test_a_commit_that_does_not_build_is_skipped_never_judged(tmp_path):
    # the fault comes in with the commit after a broken one: git is asked about the broken
    # one at most, marks it skipped, and still names the planted commit
    steps = [{"a": "0"}, {"a": "1"}, {"broken": "x"}, {"broken": None}, {"fault": "on"}, {"b": "5"}, {"c": "6"}]
    repo, commits = history(tmp_path, steps)
    first, left, judge, lines = run_bisect(repo, tmp_path / "work", commits[0], commits[-1])
    assert first == commits[4]
    # where the broken commit was asked about, it is shown as skipped
    assert all("skip" in line for line in lines if commits[2][:12] in line)


def test_only_skipped_commits_left_gives_the_candidates(tmp_path):
    steps = [{"a": "0"}, {"broken": "x", "fault": "on"}, {"broken": None}]
    repo, commits = history(tmp_path, steps)
    first, left, _, _ = run_bisect(repo, tmp_path / "work", commits[0], commits[-1])
    assert first is None and set(left) == {commits[1], commits[2]}


def test_an_interrupted_bisection_resumes_with_its_verdicts(tmp_path):
    repo, commits = history(tmp_path, TEN)

    class Interrupted(FileJudge):
        def __call__(self, commit):
            if len(self.seen) == 3:
                raise KeyboardInterrupt
            return super().__call__(commit)

    with pytest.raises(KeyboardInterrupt):
        run_bisect(repo, tmp_path / "work", commits[0], commits[-1], judge_type=Interrupted)
    first, _, judge, lines = run_bisect(repo, tmp_path / "work", commits[0], commits[-1])
    assert first == commits[5]
    # the ends and the first step were judged before the interrupt: not built again
    assert commits[0] not in judge.seen and commits[-1] not in judge.seen
    assert len(judge.seen) <= 3


def test_verdicts_serve_a_second_range_and_the_other_direction(tmp_path):
    steps = [{"a": "0"}, {"b": "1"}, {"fault": "on"}, {"c": "3"}, {"d": "4"}, {"fault": "off"}, {"e": "6"},
             {"f": "7"}]
    repo, commits = history(tmp_path, steps)
    first, _, judge, _ = run_bisect(repo, tmp_path / "work", commits[0], commits[4])
    assert first == commits[2]
    first, _, again, lines = run_bisect(repo, tmp_path / "work", commits[3], commits[-1], fixed=True)
    assert first == commits[5]
    assert not set(again.seen) & set(judge.seen)     # nothing judged twice
    assert any("[judged before]" in ln for ln in lines)


def test_ends_in_the_wrong_state_are_refused(tmp_path):
    repo, commits = history(tmp_path, TEN)
    with pytest.raises(BadInput, match="OLD .* fails"):
        run_bisect(repo, tmp_path / "w1", commits[6], commits[-1])
    with pytest.raises(BadInput, match="NEW .* passes"):
        run_bisect(repo, tmp_path / "w2", commits[0], commits[4])


def test_verdicts_from_a_console():
    sel = B.Selection(cases=("ADD(type=f32)", "ADD(type=f16)"))
    assert B.judged(sel, {"ADD(type=f32)": "OK", "ADD(type=f16)": "FAIL"}, [], 1, 1).verdict == B.BAD
    assert B.judged(sel, {"ADD(type=f32)": "OK", "ADD(type=f16)": "OK"}, [], 1, 1).verdict == B.GOOD
    # an older tree without one of the cases: never judged
    assert B.judged(sel, {"ADD(type=f32)": "OK"}, [], 1, 1).verdict == B.SKIP
    assert B.judged(sel, {"ADD(type=f32)": "OK", "ADD(type=f16)": "not supported"}, [], 1, 1).verdict == B.SKIP
    assert B.judged(sel, {"ADD(type=f32)": "OK"}, ["ADD: exit status -6"], 1, 1).verdict == B.BAD
    op = B.Selection(op="ADD")
    assert B.judged(op, {}, [], 1, 1).verdict == B.SKIP
    assert B.judged(op, {"ADD(x)": "OK", "MUL(x)": "FAIL"}, [], 1, 1).verdict == B.GOOD
    assert B.judged(op, {"ADD(x)": "OK", "ADD(y)": "not supported"}, [], 1, 1).verdict == B.GOOD
    assert B.judged(op, {"ADD(y)": "not supported"}, [], 1, 1).verdict == B.SKIP
    # exact params, escaped: a name's brackets are no regex
    assert B.Selection(cases=("ADD(ne=[1,2])",)).runs() == [("ADD", r"^(ne=\[1,2\])$")]


@pytest.mark.parametrize("args, message", [
    (["{nodir}", "a", "b", "ADD(x)"], "no such folder"),
    (["{plain}", "a", "b", "ADD(x)"], "not a git checkout"),
    (["{repo}", "nosuchref", "HEAD", "ADD(x)"], "names no commit"),
    (["{repo}", "HEAD", "HEAD~3", "ADD(x)"], "not an ancestor"),
    (["{repo}", "HEAD~2", "HEAD~2", "ADD(x)"], "the same commit"),
    (["--", "{repo}", "--upload-pack=touch", "HEAD", "ADD(x)"], "not a git ref"),
    (["{repo}", "HEAD~3", "HEAD", "ADD"], "not a case name"),
    (["{repo}", "HEAD~3", "HEAD"], "name the cases"),
    (["{repo}", "HEAD~3", "HEAD", "-o", "add"], "not an op name"),
    (["{repo}", "HEAD~3", "HEAD", "-o", "ADD", "-p", "("], "-p"),
    (["{repo}", "HEAD~3", "HEAD", "-p", "x", "ADD(x)"], "goes with -o"),
    (["{repo}", "HEAD~3", "HEAD", "--variant", "cpu", "ADD(x)"], "--variant"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, monkeypatch, args, message):
    from cannops.native import cann_sim_toolkit
    monkeypatch.setattr(cann_sim_toolkit, "is_simulated", lambda path: True)
    repo, _ = history(tmp_path, TEN)
    (tmp_path / "plain").mkdir()
    before = snapshot(repo)
    args = [a.format(nodir=tmp_path / "none", plain=tmp_path / "plain", repo=repo) for a in args]
    from click.testing import CliRunner
    from cannops.cli.main import cli
    r = CliRunner().invoke(cli, ["bisect", "--work", str(tmp_path / "work"), *args], standalone_mode=False)
    assert isinstance(r.exception, (BadInput, click.ClickException)), r.exception
    assert re.search(message, str(r.exception)), r.exception
    assert not (tmp_path / "work").exists()     # refused before any work
    assert snapshot(repo) == before


def test_bad_input_through_the_command_exits_2(tmp_path):
    import sys
    r = subprocess.run([sys.executable, "-m", "cannops.cli.main", "bisect", str(tmp_path), "a", "b", "ADD(x)"],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "error" in r.stderr


def test_work_bound_verdicts():
    cost = lambda calls, r=0, w=0: {"calls": calls, "bytes_read": r, "bytes_written": w}   # noqa: E731
    sel = B.Selection(op="SCALE")
    bound = B.WorkBound.parse("calls>1")
    assert B.judged_work(sel, {"SCALE(a)": cost(1), "SCALE(b)": cost(1)}, bound, 1, 1).verdict == B.GOOD
    v = B.judged_work(sel, {"SCALE(a)": cost(1), "SCALE(b)": cost(2)}, bound, 1, 1)
    assert v.verdict == B.BAD and "SCALE(b): calls 2 > 1" in v.why
    assert B.judged_work(sel, {}, bound, 1, 1).verdict == B.SKIP
    named = B.Selection(cases=("SCALE(a)", "SCALE(b)"))
    assert B.judged_work(named, {"SCALE(a)": cost(1)}, bound, 1, 1).verdict == B.SKIP
    assert B.WorkBound.parse("bytes>10").of(cost(1, 6, 5)) == 11
    for bad in ("calls", "calls>-1", "flops>3", "calls>1e3", "calls>" + "9" * 30):
        with pytest.raises(BadInput):
            B.WorkBound.parse(bad)
