"""`ops bisect SRC OLD NEW`: the commit of a ggml or llama.cpp checkout that broke (or, with
--fixed, fixed) ggml-cann cases, found by building each step against the simulated CANN
toolkit and running the cases through that step's own test-backend-ops.

The user's checkout is only read: the steps are checked out in a private clone that
borrows its objects (`git clone --shared`: nothing is written into SRC), and git's own
bisection (`git bisect` in that clone, with `skip` for a commit that does not build or
lacks the cases) chooses the steps. One build folder serves every step, so a step
recompiles only what changed since the one before. Each verdict is kept in the work
folder's state.json as it is reached: the same command again resumes where it stopped.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time
from typing import Callable

import click

from .engine import BadInput

GOOD, BAD, SKIP = "good", "bad", "skip"
PR_NUMBER = re.compile(r"\((?:#|llama/|ggml/)(\d+)\)")   # "(#12345)", ggml's synced "(llama/12345)"
FIRST = re.compile(r"^([0-9a-f]{40}) is the first (\w+) commit", re.M)
CASE_NAME = re.compile(r"(?P<op>[A-Z][A-Z0-9_]*)\((?P<params>.*)\)", re.S)
STATE_VERSION = 1


class BisectError(Exception):
    """The bisection cannot go on (git refused a step): one line, exit 1."""


@dataclasses.dataclass(frozen=True)
class Selection:
    """What each step runs: whole cases by name, or an op with an optional params regex."""
    cases: tuple[str, ...] = ()
    op: str | None = None
    pattern: str | None = None

    def runs(self) -> list[tuple[str, str | None]]:
        """(op, params regex) of each test-backend-ops run a step makes."""
        if self.op:
            return [(self.op, self.pattern)]
        by_op: dict[str, list[str]] = {}
        for name in self.cases:
            m = CASE_NAME.fullmatch(name)
            by_op.setdefault(m["op"], []).append(re.escape(m["params"]))
        return [(op, "^(" + "|".join(ps) + ")$") for op, ps in by_op.items()]

    def describe(self) -> list[str]:
        return list(self.cases) if self.cases else [f"{self.op}{f' -p {self.pattern}' if self.pattern else ''}"]


@dataclasses.dataclass
class Verdict:
    """What one commit did: good, bad or skip, why, and what it cost."""
    verdict: str
    why: str = ""
    build_seconds: float = 0.0
    run_seconds: float = 0.0


WORK_FIELDS = ("calls", "kernels", "bytes", "bytes_read", "bytes_written", "syncs", "allocs", "workspace_bytes")
BOUND = re.compile(r"(?P<field>[a-z_]+)>(?P<limit>\d{1,18})")


@dataclasses.dataclass(frozen=True)
class WorkBound:
    """A performance criterion: a step is bad where a selected case's counted device work
    (the simulator's `cost`, docs/device-work.md) has FIELD above LIMIT."""
    field: str
    limit: int

    @staticmethod
    def parse(text: str) -> "WorkBound":
        m = BOUND.fullmatch(text)
        if not m or m["field"] not in WORK_FIELDS:
            raise BadInput(f"--work-bound {text[:80]!r}: FIELD>N with FIELD one of {', '.join(WORK_FIELDS)}")
        return WorkBound(m["field"], int(m["limit"]))

    def of(self, cost: dict) -> int:
        if self.field == "bytes":
            return int(cost.get("bytes_read", 0)) + int(cost.get("bytes_written", 0))
        return int(cost.get(self.field, 0))


def judged_work(selection: Selection, costs: dict[str, dict | None], bound: WorkBound, built: float,
                ran: float) -> Verdict:
    """A step's verdict by counted work: a selected case over the bound -> bad; every one
    within it -> good; a named case without a count (missing, refused) -> skip."""
    mine = {n: costs.get(n) for n in selection.cases} if selection.cases else \
        {n: c for n, c in costs.items() if n.startswith(f"{selection.op}(")}
    over = [(n, bound.of(c)) for n, c in mine.items() if c is not None and bound.of(c) > bound.limit]
    if over:
        return Verdict(BAD, f"{over[0][0]}: {bound.field} {over[0][1]:,} > {bound.limit:,}", built, ran)
    missing = [n for n, c in mine.items() if c is None]
    if not mine or missing:
        return Verdict(SKIP, f"{missing[0]}: no count" if missing else "no case counted", built, ran)
    top = max(bound.of(c) for c in mine.values() if c is not None)
    return Verdict(GOOD, f"{len(mine)} within {bound.field} <= {bound.limit:,} (at most {top:,})", built, ran)


# --- the user's checkout, read only ---------------------------------------------------

def _git(repo: pathlib.Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    for key in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):   # never someone else's repo
        env.pop(key, None)
    p = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env)
    if check and p.returncode != 0:
        raise BisectError(f"git {' '.join(args[:2])} in {repo}: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    return p


def resolve(src: pathlib.Path, ref: str) -> str:
    """A ref of SRC as a full commit id; an unknown one is bad input."""
    if ref.startswith("-") or not ref.strip():
        raise BadInput(f"{ref!r} is not a git ref")
    p = _git(src, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False)
    if p.returncode != 0:
        raise BadInput(f"{ref!r} names no commit in {src}")
    return p.stdout.strip()


def check_source(src: str, old: str, new: str) -> tuple[pathlib.Path, str, str]:
    """SRC a git checkout with OLD an ancestor of NEW, NEW a ggml or llama.cpp tree."""
    path = pathlib.Path(src).expanduser()
    if not path.is_dir():
        raise BadInput(f"{src}: no such folder")
    bare = _git(path, "rev-parse", "--is-bare-repository", check=False)
    if bare.returncode != 0:
        raise BadInput(f"{src} is not a git checkout")
    if bare.stdout.strip() != "true":   # a checkout: its top; a bare repository: itself
        path = pathlib.Path(_git(path, "rev-parse", "--show-toplevel").stdout.strip())
    old_id, new_id = resolve(path, old), resolve(path, new)
    if old_id == new_id:
        raise BadInput(f"{old} and {new} are the same commit")
    if _git(path, "merge-base", "--is-ancestor", old_id, new_id, check=False).returncode != 0:
        raise BadInput(f"{old} is not an ancestor of {new}")
    if not any(_git(path, "cat-file", "-e", f"{new_id}:{p}", check=False).returncode == 0
               for p in ("tests/test-backend-ops.cpp",)):
        raise BadInput(f"{new} of {src} has no tests/test-backend-ops.cpp: not a ggml or llama.cpp tree")
    return path, old_id, new_id


def subject(repo: pathlib.Path, commit: str) -> str:
    return _git(repo, "log", "-1", "--format=%s", commit).stdout.strip()


def pr_number(text: str) -> str | None:
    m = PR_NUMBER.search(text)
    return m[1] if m else None


# --- the private clone and git's bisection --------------------------------------------

class Bisection:
    """`git bisect` in a private clone of SRC; `judge(checkout, commit)` decides each step."""

    def __init__(self, src: pathlib.Path, work: pathlib.Path, old: str, new: str, fixed: bool, key: dict,
                 paths: tuple[str, ...] = ()):
        self.src, self.work, self.old, self.new, self.fixed, self.key = src, work, old, new, fixed, key
        self.paths = paths   # only the commits that touch these are steps (git bisect's pathspec)
        self.clone = work / "src"
        # verdicts by what judges a commit (cases, variant, device), whatever the range
        # or the direction: a second bisection of the same cases reuses the first's
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
        self.state_path = work / f"state-{digest}.json"
        # with --fixed the old commits fail and the new pass: git's terms say so
        self.terms = ("broken", "fixed") if fixed else ("good", "bad")

    def prepare(self) -> dict[str, Verdict]:
        """The clone made (or kept), and the verdicts of an earlier run of the same bisection."""
        self.work.mkdir(parents=True, exist_ok=True)
        known: dict[str, Verdict] = {}
        if self.state_path.exists():
            try:
                state = json.loads(self.state_path.read_text())
            except (OSError, ValueError):
                state = {}
            if state.get("key") == self.key:
                known = {c: Verdict(**v) for c, v in state.get("verdicts", {}).items()}
        if not (self.clone / ".git").is_dir():
            if self.clone.exists():
                shutil.rmtree(self.clone)
            p = subprocess.run(["git", "clone", "--quiet", "--shared", "--no-checkout", str(self.src),
                                str(self.clone)], capture_output=True, text=True)
            if p.returncode != 0:
                raise BisectError(f"git clone of {self.src}: {p.stderr.strip()}")
        # the objects of SRC are borrowed; the two ends must be there (a fetch into SRC since)
        for c in (self.old, self.new):
            if _git(self.clone, "cat-file", "-e", f"{c}^{{commit}}", check=False).returncode != 0:
                raise BisectError(f"{c} is missing from the private clone {self.clone}: remove it and run again")
        self.save(known)
        return known

    def save(self, known: dict[str, Verdict]) -> None:
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"version": STATE_VERSION, "key": self.key,
                                   "verdicts": {c: dataclasses.asdict(v) for c, v in known.items()}}, indent=1))
        tmp.replace(self.state_path)

    def checkout(self, commit: str) -> None:
        _git(self.clone, "checkout", "--quiet", "--force", "--detach", commit)
        _git(self.clone, "clean", "-q", "-f", "-d", "-x")

    def term(self, verdict: str) -> str:
        """git's word for a verdict: with --fixed a failing commit is `broken`, a passing one `fixed`."""
        if verdict == SKIP:
            return "skip"
        failing = verdict == BAD
        old_term, new_term = self.terms
        if self.fixed:
            return old_term if failing else new_term
        return new_term if failing else old_term

    def start(self, known: dict[str, Verdict]) -> str | None:
        """git's bisection begun afresh with every verdict known; its answer, if it has one."""
        _git(self.clone, "bisect", "reset", check=False)
        old_term, new_term = self.terms
        _git(self.clone, "bisect", "start", f"--term-old={old_term}", f"--term-new={new_term}",
             self.new, self.old, "--", *self.paths)
        out = ""
        for commit in self.replayed(known):
            out = self.mark(commit, known[commit].verdict)
        return out

    def replayed(self, known: dict[str, Verdict]) -> list[str]:
        """The known commits that are steps of this bisection (verdicts are shared by every
        bisection of the same cases: another range's are left out)."""
        steps = set(_git(self.clone, "rev-list", f"{self.old}..{self.new}", "--", *self.paths).stdout.split())
        return [c for c in known if c in steps and c != self.new]

    def mark(self, commit: str, verdict: str) -> str:
        """git's answer to a verdict; when only skipped commits are left it exits non-zero
        with the candidates, which is an answer too."""
        p = _git(self.clone, "bisect", self.term(verdict), commit, check=False)
        out = p.stdout + p.stderr
        if p.returncode != 0 and conclusion(out) == (None, []):
            raise BisectError(f"git bisect {self.term(verdict)} {commit[:12]}: {out.strip().splitlines()[-1:]}")
        return out

    def current(self) -> str:
        return _git(self.clone, "rev-parse", "HEAD").stdout.strip()

    def end(self) -> None:
        _git(self.clone, "bisect", "reset", "--quiet", check=False)


def conclusion(git_output: str) -> tuple[str | None, list[str]]:
    """git bisect's last word: the first new commit, or the candidates left when only
    skipped commits remain."""
    m = FIRST.search(git_output)
    if m:
        return m[1], []
    if "only 'skip'ped commits left" in git_output:
        return None, re.findall(r"^([0-9a-f]{40})\b", git_output, re.M)
    return None, []


def bisect(bis: Bisection, known: dict[str, Verdict], judge: Callable[[str], Verdict],
           say: Callable[[str], None]) -> tuple[str | None, list[str]]:
    """The ends checked, then git's steps judged one by one until git names a commit."""
    want_old, want_new = (BAD, GOOD) if bis.fixed else (GOOD, BAD)
    step = 0
    for commit, want, name in ((bis.old, want_old, "OLD"), (bis.new, want_new, "NEW")):
        seen = commit in known
        v = known[commit] if seen else _judged(bis, commit, judge, known)
        say(_step_line(bis, "end", commit, v, seen))
        if v.verdict != want:
            state = {GOOD: "passes", BAD: "fails", SKIP: "cannot be judged"}[v.verdict]
            raise BadInput(f"{name} {commit[:12]} {state} ({v.why}); it must "
                           f"{'pass' if want == GOOD else 'fail'} for this bisection")
    out = bis.start(known)
    for commit in bis.replayed(known):   # an earlier run's steps, replayed into git
        step += 1
        say(_step_line(bis, str(step), commit, known[commit], known=True))
    while True:
        first, left = conclusion(out)
        if first or left:
            return first, left
        commit = bis.current()
        step += 1
        seen = commit in known
        v = known[commit] if seen else _judged(bis, commit, judge, known)
        say(_step_line(bis, str(step), commit, v, seen))
        out = bis.mark(commit, v.verdict)


def _judged(bis: Bisection, commit: str, judge: Callable[[str], Verdict], known: dict[str, Verdict]) -> Verdict:
    bis.checkout(commit)
    v = judge(commit)
    known[commit] = v
    bis.save(known)
    return v


def _step_line(bis: Bisection, step: str, commit: str, v: Verdict, known: bool = False) -> str:
    text = subject(bis.clone, commit)
    text = text if len(text) <= 60 else text[:57] + "..."
    return (f"{step:>4}  {commit[:12]}  {text:<60}  build {v.build_seconds:5.0f} s  run {v.run_seconds:4.0f} s  "
            f"{v.verdict}{f' ({v.why})' if v.why else ''}{'  [judged before]' if known else ''}")


# --- one step: build the checkout, run its test-backend-ops ---------------------------

@dataclasses.dataclass(frozen=True)
class Builder:
    """Builds a checkout as `make ggml-cann GGML_SRC=...` does, into one folder for every
    step, and judges the selection on that build's test-backend-ops."""
    clone: pathlib.Path
    out: pathlib.Path
    logs: pathlib.Path
    variant: str
    selection: Selection
    device: str
    timeout: float
    bound: WorkBound | None = None

    def __call__(self, commit: str) -> Verdict:
        self.logs.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        env = {**os.environ, "GGML_SRC": str(self.clone), "GGML_CANN_OUT": str(self.out)}
        env.pop("LLAMA_CPP_PYTHON", None)
        log = self.logs / f"{commit[:12]}.build.log"
        with log.open("w") as f:
            rc = subprocess.run([sys.executable, "-m", "cannops.native.ggml_cann_build", self.variant],
                                stdout=f, stderr=subprocess.STDOUT, env=env).returncode
        built = time.monotonic() - t0
        if rc != 0:
            return Verdict(SKIP, f"does not build: {log}", built)
        binary = self.out / self.variant / "bin" / "test-backend-ops"
        if self.bound is not None:
            t1 = time.monotonic()
            costs = self._counted(binary, commit)
            return judged_work(self.selection, costs, self.bound, built, time.monotonic() - t1)
        from .engine import case_statuses
        t1, statuses, died = time.monotonic(), {}, []
        for op, rx in self.selection.runs():
            text, rc = self._run(binary, op, rx, commit)   # (a case printed twice keeps its worst)
            statuses.update({f"{op}({params})": st for params, st in case_statuses(text, op).items()})
            if rc != 0:
                died.append(f"{op}: exit status {rc}")
        return judged(self.selection, statuses, died, built, time.monotonic() - t1)

    def _run(self, binary: pathlib.Path, op: str, rx: str | None, commit: str) -> tuple[str, int]:
        cmd = [str(binary), "test", "-b", self.device, "-o", op, *(["-p", rx] if rx else [])]
        try:
            p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=self.timeout,
                               stdin=subprocess.DEVNULL)
            text, rc = p.stdout.decode(errors="replace"), p.returncode
        except subprocess.TimeoutExpired as e:
            text, rc = (e.stdout or b"").decode(errors="replace"), -9
        (self.logs / f"{commit[:12]}.{op}.log").write_text(f"$ {' '.join(cmd)}\n{text}")
        return text, rc


    def _counted(self, binary: pathlib.Path, commit: str) -> dict[str, dict | None]:
        """name -> counted device work of each case, from `ops tbo --cost` over the build."""
        out: dict[str, dict | None] = {}
        for op, rx in self.selection.runs():
            results = self.logs / f"{commit[:12]}.{op}.json"
            results.unlink(missing_ok=True)
            cmd = [sys.executable, "-m", "cannops.cli.main", "tbo", str(binary), "--cost", "-o", op,
                   "-b", self.device, "--allow-not-run", "--timeout", str(self.timeout), "--results", str(results),
                   *(["-p", f"{op}={rx}"] if rx else [])]
            with (self.logs / f"{commit[:12]}.{op}.log").open("w") as f:
                subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            try:
                data = json.loads(results.read_text())
            except (OSError, ValueError):
                continue
            for r in data.get("results", []):
                out[f"{r['op']}({r['params']})"] = r.get("cost") if r.get("status") == "OK" else None
        return out


def judged(selection: Selection, statuses: dict[str, str], died: list[str], built: float, ran: float) -> Verdict:
    """A step's verdict: a selected case FAILs or a run dies -> bad; the cases pass -> good;
    a named case missing or not supported (a tree without it), or an op none of whose
    cases ran, -> skip, never judged. With -o, the op's unsupported cases are left out."""
    if selection.cases:
        mine = {n: statuses.get(n) for n in selection.cases}
    else:
        mine = {n: s for n, s in statuses.items() if n.startswith(f"{selection.op}(") and s in ("OK", "FAIL")}
    failed = [n for n, s in mine.items() if s == "FAIL"]
    if failed:
        return Verdict(BAD, f"FAIL {failed[0]}{f' and {len(failed) - 1} more' if len(failed) > 1 else ''}", built, ran)
    if died:
        return Verdict(BAD, f"died: {died[0]}", built, ran)
    missing = [n for n, s in mine.items() if s != "OK"]
    if not mine or missing:
        why = f"{missing[0]}: {mine[missing[0]] or 'not in its test-backend-ops'}" if missing else "no case ran"
        return Verdict(SKIP, why, built, ran)
    return Verdict(GOOD, f"{len(mine)} OK", built, ran)


# --- the command -----------------------------------------------------------------------

def work_folder(root: pathlib.Path, src: pathlib.Path, variant: str) -> pathlib.Path:
    """The folder of SRC's private clone and of its build for VARIANT under ROOT: every
    bisection of that checkout on that variant shares them (one after the other), so a
    second one recompiles only what differs from the last step built."""
    digest = hashlib.sha256(json.dumps([str(src), variant]).encode()).hexdigest()[:16]
    return root / digest


def run_bisect(src: str, old: str, new: str, cases: tuple[str, ...], options: dict) -> int:
    """`ops bisect` (cli/bisect_command.py) with its options checked: its exit status."""
    op, fixed, variant, paths = options["op"], options["fixed"], options["variant"], options["paths"]
    device, timeout = options["device"], options["timeout"]
    selection = _selection(cases, op, options["pattern"])
    bound = WorkBound.parse(options["work_bound"]) if options["work_bound"] else None
    from cannops.native import cann_sim_toolkit, ggml_cann_build
    if variant not in ggml_cann_build.VARIANTS or variant == "cpu":
        raise BadInput(f"--variant {variant!r}: one of {', '.join(v for v in ggml_cann_build.VARIANTS if v != 'cpu')}")
    if timeout <= 0 or timeout != timeout:
        raise BadInput("--timeout must be a positive number of seconds")
    if not cann_sim_toolkit.is_simulated(ggml_cann_build.TOOLKIT):
        raise BadInput(f"no simulated toolkit at {ggml_cann_build.TOOLKIT}: make cann-sim-toolkit first")
    path, old_id, new_id = check_source(src, old, new)
    for p in paths:
        if not p or p.startswith("-") or "\n" in p:
            raise BadInput(f"--path {p!r} is not a path inside the checkout")
    key = {"src": str(path), "variant": variant, "device": device, "cases": selection.describe(),
           **({"work_bound": f"{bound.field}>{bound.limit}"} if bound else {})}
    root = pathlib.Path(options["work_root"]) if options["work_root"] else ggml_cann_build.BUILD / "bisect"
    work = work_folder(root, path, variant)
    bis = Bisection(path, work, old_id, new_id, fixed, key, tuple(paths))
    known = bis.prepare()
    if known:
        click.echo(f"bisect: {len(known)} commits judged already in {work}")
    judge = Builder(bis.clone, work / "out", work / "logs", variant, selection, device, timeout, bound)
    click.echo(f"bisect: {path} {old_id[:12]}..{new_id[:12]} on {variant}, {', '.join(selection.describe())}")
    try:
        first, left = bisect(bis, known, judge, click.echo)
    finally:
        bis.end()
    return _report(bis, first, left, fixed)


def _selection(cases, op, pattern) -> Selection:
    if cases and op:
        raise BadInput("give CASEs or -o OP, not both")
    if pattern and not op:
        raise BadInput("-p REGEX goes with -o OP")
    if op:
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", op):
            raise BadInput(f"-o {op!r} is not an op name (ADD, MUL_MAT)")
        if pattern:
            try:
                re.compile(pattern)
            except re.error as e:
                raise BadInput(f"-p {pattern!r}: {e}") from None
        return Selection(op=op, pattern=pattern)
    if not cases:
        raise BadInput("name the cases (CASE... or -o OP) whose state changed between OLD and NEW")
    for name in cases:
        if len(name) > 4096 or not CASE_NAME.fullmatch(name) or "\n" in name:
            raise BadInput(f"{name[:80]!r} is not a case name (OP(params), as test-backend-ops prints it)")
    return Selection(cases=tuple(dict.fromkeys(cases)))


def _report(bis: Bisection, first: str | None, left: list[str], fixed: bool) -> int:
    what = "fixed" if fixed else "bad"
    if first:
        text = subject(bis.clone, first)
        pr = pr_number(text)
        click.echo(f"first {what} commit: {first} {text}" + (f" (llama.cpp #{pr})" if pr else ""))
        return 0
    click.echo(f"bisect: no single first {what} commit: the commits that could not be judged leave "
               f"{len(left)} candidates: {', '.join(c[:12] for c in left)}")
    return 1
