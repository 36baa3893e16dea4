"""The Ascend CI's two shared 910B reports (shared/reference/ci-summary-example-{a,b}.md)
replayed at the ggml they ran, on the simulated 910B, and docs/ascend-ci-replay.md
written from the runs.

The CI (Ascend/Ascend-CI, .github/workflows/llamacpp_test.yml) builds llama.cpp master,
runs `test-backend-ops test -o OP` once per op of a fixed list (CI_OPS), keeps each op's
console as OP.log, and classifies each log by substrings (script/classify_backend_ops.py:
any "FAIL" -> fail, "OK" and "NOT SUPPORTED" -> partial, "OK" -> supported, "NOT
SUPPORTED" -> unsupported, else unknown; case-insensitive). The replay runs the same
ops with `ops tbo` (which also resumes an op after an abort, so every case gets a status;
its --log-dir keeps each op's console, each process after a `$ COMMAND` line) and
classifies the first process of each op, the CI's one, by the same rule.

  python bench/ascend_ci_replay.py trees          unpack the reports' ggml trees from a
                                                  ggml-org/ggml clone (--ggml-git DIR, or
                                                  GGML_MIRROR: its git directory, e.g.
                                                  ggml/.git or a bare clone; build/ggml-src/)
  python bench/ascend_ci_replay.py build [T ...]  make ggml-cann VARIANTS=910B per target
  python bench/ascend_ci_replay.py run [T ...]    the CI's ops through `ops tbo -j 2`: results
                                                  build/replay/<T>.json, consoles <T>-logs/
  python bench/ascend_ci_replay.py doc            docs/ascend-ci-replay.md
  python bench/ascend_ci_replay.py convert [T ...]  once: a bench/tbo_ops.py result (before
                                                  ops tbo) rewritten in ops' schema

`make ascend-ci-replay` does all four. Nothing under build/ is committed.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import time

from cannops.cli.engine import (FAIL, NOT_SUPPORTED, OK, SKIPPED, Reader, is_death, load_run,
                                log_processes)

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = ROOT / "build"
REPLAY = BUILD / "replay"
REFERENCE = ROOT.parent / "shared" / "reference"
DOC = ROOT / "docs" / "ascend-ci-replay.md"
ANSI = re.compile(r"\x1b\[[0-9;]*m")

# target -> how it is built; the reports' trees are ggml-org/ggml commits whose synced
# llama.cpp commits bracket the report (see the doc)
TARGETS = {
    "a": {"ggml_commit": "ebc3a0f4", "report": "ci-summary-example-a.md",
          "what": "ggml-org/ggml ebc3a0f4 (v0.9.5, synced llama.cpp up to 2025-12-31: after "
                  "#17737 SSM_CONV 2025-12-26, before #17512 2026-01-05)"},
    "b": {"ggml_commit": "a82d61d2", "report": "ci-summary-example-b.md",
          "what": "ggml-org/ggml a82d61d2 (v0.9.5-102, synced llama.cpp up to 2026-01-25: "
                  "after #18653 GATED_LINEAR_ATTN 2026-01-16)"},
    "0.3.17": {"release": "0.3.17", "what": "llama-cpp-python 0.3.17 (ggml 0.9.8), the nearest release"},
}
# the CI's op list (llamacpp_test.yml, "Define operator list"), in its order
CI_OPS = """ABS ACC ADD ADD1 ARANGE ARGMAX ARGSORT CLAMP CONCAT CONT CONV_2D CONV_2D_DW
CONV_TRANSPOSE_1D CONV_TRANSPOSE_2D COS COUNT_EQUAL CPY CROSS_ENTROPY_LOSS CROSS_ENTROPY_LOSS_BACK
DIAG_MASK_INF DIV DUP ELU EXP FLASH_ATTN_EXT GATED_LINEAR_ATTN GEGLU GEGLU_ERF GEGLU_QUICK GELU
GELU_ERF GELU_QUICK GET_ROWS GET_ROWS_BACK GROUP_NORM HARDSIGMOID HARDSWISH IM2COL L2_NORM
LEAKY_RELU LOG MEAN MUL MUL_MAT MUL_MAT_ID NEG NORM OPT_STEP_ADAMW OUT_PROD PAD PAD_REFLECT_1D
POOL_2D REGLU RELU REPEAT REPEAT_BACK RMS_NORM RMS_NORM_BACK RMS_NORM_MUL_ADD ROLL ROPE ROPE_BACK
RWKV_WKV6 RWKV_WKV7 SCALE SET SET_ROWS SGN SIGMOID SILU SILU_BACK SIN SOFTCAP SOFT_MAX
SOFT_MAX_BACK SQR SQRT SSM_CONV SSM_SCAN STEP SUB SUM SUM_ROWS SWIGLU TANH TIMESTEP_EMBEDDING
UPSCALE""".split()
SYMBOL = {"supported": "✅", "partial": "🟡", "fail": "❌", "unsupported": "❓", "unknown": "🔍"}
STATUS = {v: k for k, v in SYMBOL.items()}

# Every difference between a report and its replay, judged: op -> (kind, evidence).
# kind: "classifier" (the CI's substring rule, not the device), "version" (the replayed
# tree is not the CI's exact commit), "sim-strict" / "sim-lenient" (the simulator; fixed
# where it refused what a real 910B passed), "ggml-cann" (a finding on ggml-cann itself).
JUDGEMENTS: dict[str, dict[str, tuple[str, str]]] = {"a": {}, "b": {}}


def classify_log(text: str) -> str:
    """The CI's substring rule (Ascend-CI script/classify_backend_ops.py), restated."""
    upper = text.upper()
    if "FAIL" in upper:
        return "fail"
    ok, ns = "OK" in upper, "NOT SUPPORTED" in upper
    return "partial" if ok and ns else "supported" if ok else "unsupported" if ns else "unknown"


def case_status(counts: dict, died: bool) -> str:
    """ops' own per-op status from the cases (cli/support.py's rule): an abort is a FAIL."""
    if died or counts.get("FAIL"):
        return "fail"
    ok, ns = counts.get("OK", 0), counts.get("not supported", 0)
    if not ok and not ns:
        return "unknown"
    return "unsupported" if not ok else "partial" if ns else "supported"


def report_statuses(name: str) -> dict[str, str]:
    text = (REFERENCE / name).read_text()
    summary = text.split("### Operators with changed status")[0]
    return {op: STATUS[s] for op, s in re.findall(r"^\| (\w+) \| (\S+) \|$", summary, re.M) if s in STATUS}


def report_changes(name: str) -> dict[str, tuple[str, str]]:
    text = (REFERENCE / name).read_text()
    part = text.split("### Operators with changed status")[-1]
    return {op: (a, b) for op, a, b in re.findall(r"^\| (\w+) \| (\w+) \(\S+\) \| (\w+) \(\S+\) \|$", part, re.M)}


def report_logs(name: str) -> dict[str, dict[str, str]]:
    """op -> params -> status of the case lines in the report's log tails (its changed ops)."""
    text = (REFERENCE / name).read_text()
    logs = {}
    for op, body in re.findall(r"^#### (\w+) log .*?```text\n(.*?)```", text, re.M | re.S):
        logs[op] = {m[1]: ("OK" if m[2].startswith("OK") else "not supported" if m[2].startswith("not supported")
                           else "FAIL") for m in re.finditer(rf"^  {op}\((.*)\): (\S.*)$", body, re.M)}
    return logs


def binary(target: str) -> pathlib.Path:
    return BUILD / f"ggml-cann-{'ci-' if 'ggml_commit' in TARGETS[target] else ''}{target}" / "910B" / "bin" / "test-backend-ops"


def tree(target: str) -> pathlib.Path:
    return BUILD / "ggml-src" / f"ggml-{TARGETS[target]['ggml_commit']}"


def trees_missing() -> list[str]:
    """The targets whose ggml tree is not unpacked yet."""
    return [t for t, spec in TARGETS.items() if "ggml_commit" in spec and not (tree(t) / "CMakeLists.txt").exists()]


def ggml_git_dir(given: str | None) -> pathlib.Path | None:
    """The ggml-org/ggml git directory (--ggml-git, else GGML_MIRROR): None where neither
    names a folder."""
    path = given or os.environ.get("GGML_MIRROR")
    return pathlib.Path(path) if path and pathlib.Path(path).is_dir() else None


def cmd_trees(targets: list[str], git_dir: pathlib.Path) -> None:
    for t in targets:
        spec = TARGETS[t]
        tree(t).mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "--git-dir", str(git_dir), "archive", spec["ggml_commit"]],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(tree(t))], input=archive, check=True)
        print(f"replay: {t}: {tree(t)}")


def cmd_build(targets: list[str]) -> None:
    for t in targets:
        spec = TARGETS[t]
        out = binary(t).parents[2]
        src = [f"GGML_SRC={tree(t)}"] if "ggml_commit" in spec else [f"LLAMA_CPP_PYTHON={spec['release']}"]
        t0 = time.monotonic()
        subprocess.run(["make", "-C", str(ROOT), "ggml-cann", "VARIANTS=910B", f"GGML_CANN_OUT={out}", *src],
                       check=True)
        print(f"replay: {t}: built in {time.monotonic() - t0:.0f} s")


def results_file(target: str) -> pathlib.Path:
    return REPLAY / f"{target}.json"


def cmd_run(targets: list[str], jobs: int = 2) -> None:
    """`ops tbo` over the CI's ops; an interrupted or killed run goes on where it stopped
    (its journal: --resume), a finished one is kept (delete its results to run it again)."""
    from cannops.cli.engine import journal_path
    REPLAY.mkdir(parents=True, exist_ok=True)
    for t in targets:
        res, logs = results_file(t), REPLAY / f"{t}-logs"
        resume = pathlib.Path(journal_path(str(res))).exists() or (
            res.exists() and json.loads(res.read_text()).get("interrupted"))
        if res.exists() and not resume:
            print(f"replay: {t}: done before ({res.relative_to(ROOT)}; delete it to run again)")
            continue
        if not resume and logs.exists():   # a fresh run: its OP.log (a resumed one adds OP.2.log)
            for old in logs.glob("*.log"):
                old.unlink()
        t0 = time.monotonic()
        subprocess.run([sys.executable, "-m", "cannops.cli.main", "tbo", str(binary(t)), "-b", "CANN0",
                        "-o", ",".join(CI_OPS), "-j", str(jobs),
                        "--resume" if resume else "--results", str(res), "--log-dir", str(logs)], check=False)
        seconds = time.monotonic() - t0
        if not res.exists():
            sys.exit(f"replay: {t}: ops tbo wrote no {res}")
        if not resume:     # a resumed run's time is not the whole run's
            (REPLAY / f"{t}.time.json").write_text(json.dumps({"seconds": round(seconds), "jobs": jobs}) + "\n")
        print(f"replay: {t}: {len(CI_OPS)} ops in {seconds:.0f} s (-j {jobs})")


def first_process(log: pathlib.Path) -> str:
    """The console of an op's first test-backend-ops process: what the CI's OP.log holds."""
    if not log.exists():
        return ""
    procs = log_processes(log.read_text(errors="replace"))
    return procs[0][1] if procs else ""


def in_build(text: str) -> str:
    """Paths under build/ as the checkout names them (its own, or one its build/ links to)."""
    return re.sub(r"(?<![\w.])/[^\s:`]*?/build/", "build/", text)


def no_case(op: str) -> dict:
    return {"op": op, "counts": dict.fromkeys((OK, NOT_SUPPORTED, FAIL, SKIPPED), 0), "cases": {}, "deaths": [],
            "seconds": 0.0}


def per_op(results) -> dict[str, dict]:
    """A results file's cases, op by op, as the doc reads them: counts, params -> status,
    the deaths (ops tbo's FAIL whose reason is the death's story), seconds."""
    runs: dict[str, dict] = {}
    for r in sorted(results, key=lambda r: r.index):
        o = runs.setdefault(r.op, no_case(r.op))
        o["counts"][r.status] = o["counts"].get(r.status, 0) + 1
        o["cases"][r.params] = r.status
        o["seconds"] += r.seconds
        if is_death(r):
            o["deaths"].append(r)
    return runs


def load_results(path: pathlib.Path):
    return load_run(str(path)) if path.exists() else None


def load(target: str) -> dict[str, dict]:
    run = load_results(results_file(target))
    if run is None:
        return {}
    runs = per_op(run.results)
    for log in sorted((REPLAY / f"{target}-logs").glob("*.log")):   # an op with no case: its log only
        if "." not in log.stem:   # (OP.2.log: a resumed run's later processes, beside its OP.log)
            runs.setdefault(log.stem, no_case(log.stem))
    for op, r in runs.items():
        text = first_process(REPLAY / f"{target}-logs" / f"{op}.log")
        r["ci"] = classify_log(text) if text else None
        r["status"] = case_status(r["counts"], bool(r["deaths"]))
        found = re.findall(r"^.*GGML_ASSERT\(.*\) failed.*$|^.*GGML_ABORT.*$", text, re.M)
        r["assert"] = in_build(found[0]) if found else None
    return runs


def run_minutes(target: str, runs: dict[str, dict]) -> str:
    """The run's wall time (cmd_run's record), else its processes' time added up."""
    rec = REPLAY / f"{target}.time.json"
    if rec.exists():
        t = json.loads(rec.read_text())
        return f"{t['seconds'] / 60:.0f} min (-j {t['jobs']})"
    return f"{sum(r['seconds'] for r in runs.values()) / 60:.0f} min of processes"


def _tally(cases: dict[str, str]) -> dict[str, int]:
    out: dict[str, int] = {}
    for st in cases.values():
        out[st] = out.get(st, 0) + 1
    return out


def cell(r: dict | None) -> str:
    if r is None:
        return "–"
    c = r["counts"]
    return f"{c['OK']} / {c['not supported']} / {c['FAIL']}" + (f" †{len(r['deaths'])}" if r["deaths"] else "")


def source_line(target: str) -> str:
    """The build the run names (ops tbo records its source.json), else the build's own."""
    run = load_results(results_file(target))
    src = binary(target).parents[1] / "source.json"
    rec = run.source if run and run.source else json.loads(src.read_text()) if src.exists() else {}
    name = in_build(rec.get("name", "?"))
    return f"{TARGETS[target]['what']}; built from `{name}` (ggml {rec.get('ggml_version', '?')} by its CMakeLists)"


def cmd_doc(_targets: list[str]) -> None:
    runs = {t: load(t) for t in TARGETS}
    out = [HEADER.strip(), ""]
    out += ["| replay | source |", "| --- | --- |"]
    for t in TARGETS:
        how = ("by bench/tbo_ops.py, ops tbo's predecessor, its results converted to ops' schema "
               "(`convert`)" if results_file(t).with_name(results_file(t).name + ".tbo_ops").exists()
               else "by `ops tbo`")
        out.append(f"| {t} | {source_line(t)}; {len(runs[t])} ops run in {run_minutes(t, runs[t])} {how} |")
    out.append("")
    out += summary(runs)
    for t in ("a", "b"):
        rep = report_statuses(TARGETS[t]["report"])
        mine, rel = runs[t], runs["0.3.17"]
        agree = [op for op in rep if mine.get(op, {}).get("ci") == rep[op]]
        agree_cases = [op for op in rep if mine.get(op, {}).get("status") == rep[op]]
        out += [f"## Report {t} ({TARGETS[t]['report']})", "",
                f"Replayed at {TARGETS[t]['what']}.", "",
                f"**Agreement: {len(agree)} of the report's {len(rep)} ops** have the same status "
                f"when the replay's logs are classified as the CI classifies them; "
                f"{len(agree_cases)} of {len(rep)} when classified from the cases (ops' rule: "
                f"❓ when no case is supported).", "",
                "| op | report | replay (CI's rule) | replay (cases) | OK / n.s. / FAIL (†aborts) | "
                "0.3.17 (CI's rule) | judgement |", "| --- | --- | --- | --- | --- | --- | --- |"]
        for op in rep:
            r = mine.get(op)
            ci = SYMBOL.get(r["ci"], "–") if r else "–"
            st = SYMBOL.get(r["status"], "–") if r else "–"
            rr = rel.get(op)
            judged = JUDGEMENTS[t].get(op)
            note = "" if r and r["ci"] == rep[op] else (f"**{judged[0]}**: {judged[1]}" if judged else "**not judged**")
            if r and r["ci"] == rep[op] and r["status"] != rep[op]:
                note = (f"{judged[0]}: {judged[1]}" if judged else
                        "classifier: no case supported; the CI's 🟡 comes from the run's final `OK`"
                        if r["status"] == "unsupported" else "**not judged**")
            out.append(f"| {op} | {SYMBOL[rep[op]]} | {ci} | {st} | {cell(r)} | "
                       f"{SYMBOL.get(rr['ci'], '–') if rr else '–'} | {note} |")
        out.append("")
        if t == "a":
            r = mine.get("OUT_PROD")
            out += ["**OUT_PROD's abort, reproduced.** The report's log stops at "
                    "`aclnn_ops.cpp:3723: GGML_ASSERT(dst->ne[0] == nr) failed` in `ggml_cann_ssm_conv`; "
                    f"the replay's first OUT_PROD process: `{(r or {}).get('assert') or 'not reached'}`.", ""]
        for op, cases in report_logs(TARGETS[t]["report"]).items():
            r = mine.get(op, {"cases": {}})
            if not cases:      # an abort before the first case line (report a's OUT_PROD)
                continue
            same = sum(1 for c, st in cases.items() if r["cases"].get(c) == st)
            others = sorted({f"{st} → {r['cases'].get(c, 'absent')}" for c, st in cases.items()
                             if r["cases"].get(c) != st})
            tally = ", ".join(f"{n} {st}" for st, n in _tally(cases).items())
            out += [f"**{op}'s log in the report, case by case**: {len(cases)} case lines ({tally}); "
                    f"the replay gives {same} of them the same status"
                    + (f" (the others: {', '.join(others)})" if others else "") + ".", ""]
        changes = report_changes(TARGETS[t]["report"])
        if t == "b":
            a, b = runs["a"], runs["b"]
            moved = {op: (a[op]["ci"], b[op]["ci"]) for op in CI_OPS
                     if op in a and op in b and a[op]["ci"] != b[op]["ci"]}
            out += ["**From a to b.** The report's own changes: " +
                    ", ".join(f"{op} {x} → {y}" for op, (x, y) in changes.items()) +
                    ". The replays' (CI's rule): " +
                    (", ".join(f"{op} {x} → {y}" for op, (x, y) in moved.items()) or "none") + ".", ""]
            out += baseline_section("b", "a")
    out += release_section(runs)
    out += crashes(runs)
    out += [FOOTER.strip(), ""]
    DOC.write_text("\n".join(out))
    print(f"replay: {DOC}")


def baseline_section(target: str, base: str) -> list[str]:
    """What ops' own report of one replay against another calls changed (its rule: every
    case, ❓ when none is supported), as `ops support --markdown --baseline` prints it."""
    new, old = results_file(target), results_file(base)
    if not (new.exists() and old.exists()):
        return []
    cmd = ["ops", "support", "--results", str(new.relative_to(ROOT)), "--markdown", "--baseline",
           str(old.relative_to(ROOT))]
    md = subprocess.run([sys.executable, "-m", "cannops.cli.main", *cmd[1:]], capture_output=True, text=True,
                        check=True, cwd=ROOT).stdout
    part = md.split("### Operators with changed status", 1)[-1].strip().split("\n\n")[0]
    rows = [ln for ln in part.splitlines() if ln.startswith("|")]
    return [f"**ops' own report of {target} against {base}**: `{' '.join(cmd)}` (the CI's report with "
            "its status table, changed statuses and log tails; each op classified from its cases) "
            + ("lists as changed:" if rows else "lists no change."), "", *rows, *([""] if rows else [])]


# 0.3.17 (ggml 0.9.8, after both reports) against the reports: op -> judgement
RELEASE_JUDGEMENTS = {
    "OUT_PROD": "version: a's ❌ is the missing `break` (#17737), gone with #17512 before 0.9.8",
    "GATED_LINEAR_ATTN": "version: ✅ since #18653 (2026-01-16), after report a",
    "L2_NORM": "ggml-cann (fixed by 0.11.1): test-backend-ops 0.9.8 added `eps=10` cases (2 FAIL, "
               "`ERR = 0.29 > 1e-7`); ggml-cann 0.9.8 computes x / ‖x‖ with aclnnNorm + aclnnDiv and "
               "ignores eps, where ggml's reference divides by max(‖x‖, eps); from 0.11.1 ggml-cann "
               "clamps the norm at eps (aclnnClampMin) and passes them",
    "MUL_MAT": "classifier and ggml-cann: ggml-cann 0.9.8 lets bf16 × f32 through and aborts on "
               "aclnnMm's refusal (139 cases, `docs/ggml-cann-on-cann-sim.md`), which 0.9.5 answered "
               "`not supported`; the abort prints `CANN error` and a backtrace, no `FAIL`, and the "
               "first process had printed only OK lines, so the CI's rule says ✅ (ops' rule: ❌)",
}


def release_section(runs: dict[str, dict]) -> list[str]:
    rel = runs.get("0.3.17") or {}
    if not rel:
        return []
    lines = ["## The nearest release: 0.3.17 (ggml 0.9.8)", "",
             "llama-cpp-python 0.3.17 vendors a llama.cpp of after both reports. Its replay "
             "against each report (CI's rule), every difference judged:", "",
             "| op | report a | report b | 0.3.17 (CI's rule) | 0.3.17 (cases) | OK / n.s. / FAIL | judgement |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    ra, rb = report_statuses(TARGETS["a"]["report"]), report_statuses(TARGETS["b"]["report"])
    agree = {t: sum(1 for op, st in rep.items() if rel.get(op, {}).get("ci") == st) for t, rep in (("a", ra), ("b", rb))}
    for op in CI_OPS:
        r = rel.get(op)
        if r is None or (r["ci"] == ra.get(op) and r["ci"] == rb.get(op)):
            continue
        note = RELEASE_JUDGEMENTS.get(op, "**not judged**")
        lines.append(f"| {op} | {SYMBOL.get(ra.get(op), '–')} | {SYMBOL.get(rb.get(op), '–')} | "
                     f"{SYMBOL[r['ci']] if r['ci'] else '–'} | {SYMBOL[r['status']]} | {cell(r)} | {note} |")
    lines += ["", f"Agreement under the CI's rule: {agree['a']} of {len(ra)} with report a, "
              f"{agree['b']} of {len(rb)} with report b.", ""]
    return lines


def summary(runs: dict[str, dict]) -> list[str]:
    lines = ["## Summary", ""]
    for t in ("a", "b"):
        rep, mine = report_statuses(TARGETS[t]["report"]), runs[t]
        agree = sum(1 for op in rep if mine.get(op, {}).get("ci") == rep[op])
        by_cases = [op for op in rep if op in mine and mine[op]["status"] != rep[op]]
        unsup = [op for op in by_cases if mine[op]["status"] == "unsupported" and rep[op] == "partial"]
        lines.append(f"* Report {t}: the replay agrees on **{agree} of {len(rep)}** ops under the CI's "
                     f"rule. Classified from the cases, {len(by_cases)} ops differ, {len(unsup)} of them "
                     f"🟡 in the report and ❓ in the replay: no case of theirs is supported, and the CI's "
                     f"substring rule turns the run's final `OK` into 🟡"
                     + (f"; the others: {', '.join(op for op in by_cases if op not in unsup)}" if len(unsup) < len(by_cases) else "")
                     + ".")
    lines += ["* Neither too strict nor too lenient, as far as the reports can tell: the simulator "
              "cannot make a case `not supported` (ggml-cann's supports_op decides that), only FAIL "
              "or abort it, and no op that the real 910B ran without a FAIL (✅ or 🟡) FAILs or aborts "
              "in the replay; the one ❌ (OUT_PROD in a) is ❌ for the same assert. Lenient by design: "
              "the launcher's named relaxations (`CANN_SIM_ALLOW`, docs/ggml-cann-on-cann-sim.md), "
              "each use printed. The report logs' case lines (SSM_CONV in a, GATED_LINEAR_ATTN and "
              "OUT_PROD in b) get the same status in the replay, case by case.",
              "* Report a's OUT_PROD abort is reproduced on the same line (below), and the changes "
              "from a to b are the report's own: OUT_PROD ❌ → 🟡 (PR #17512 added the missing "
              "`break`), GATED_LINEAR_ATTN 🟡 → ✅ (PR #18653).",
              "* To get there the simulator gained three aclnn operators that ggml 0.9.5 calls and "
              "later versions do not (aclnnLogSoftmax, aclnnInplaceEqTensor, aclnnGer; "
              "`docs/cann-sim-dtypes.md`): the toolkit's build named each as missing.", ""]
    return lines


def signal_deaths(results) -> list:
    """The deaths by a signal other than abort's (ops tbo: `died (killed by SIGSEGV)`)."""
    return [r for r in results if is_death(r) and r.reason.startswith("died (killed by")]


def signal_name(r) -> str:
    m = re.match(r"died \(killed by (\S+?)\)", r.reason)
    return m[1] if m else r.reason.split("\n")[0]


def case_name(r) -> str:
    """ops tbo names a death after every listed case `#N`: an unlisted case, or the exit."""
    return "(none named: an unlisted case, or the exit)" if r.params.startswith("#") else f"`{r.params}`"


def crashes(runs: dict[str, dict]) -> list[str]:
    """The first runs' deaths by a signal other than abort's (kept in
    build/replay/crashed-first-run/: a results file and the op's log per crash), and what
    the rerun of those ops gave; then any in the runs above."""
    where = REPLAY / "crashed-first-run"
    rows, now = [], []
    for t in TARGETS:
        first = load_results(where / f"{t}.json")
        for r in signal_deaths(first.results if first else []):
            text = first_process(where / f"{t}-{r.op}.log")
            # bench/tbo_ops.py blamed the first case not finished; the log names the one begun
            reader = Reader()
            for line in text.splitlines():
                reader.feed(line)
            case = f"`{reader.head.params}`" if reader.head and reader.head.op == r.op else case_name(r)
            rerun = cell(runs[t][r.op]) if r.op in runs[t] else "– (not a CI op: not in this run)"
            rows.append(f"| {t} | {r.op} | {signal_name(r)} | {case} | {SYMBOL[classify_log(text)]} | {rerun} |")
        for op, r in runs[t].items():
            now += [f"| {t} | {op} | {signal_name(d)} | {case_name(d)} | {SYMBOL.get(r['ci'], '–')} | {cell(r)} |"
                    for d in signal_deaths(r["deaths"])]
    out = []
    if rows:
        out += ["## Crashes by a signal in the first runs", "",
                "The first runs of the replays (two replays and two builds at once on the 2 cores, "
                f"with two other engineers' jobs: load 6 to 11) lost {len(rows)} processes to a signal, "
                "not to an abort; each is the first process of its op, so the CI's rule read its log. "
                "None came back: every op was run again whole (the table above has the rerun), and "
                "the cases alone 6 to 12 times (a: MUL_MAT_ID, POOL_2D; b: FLASH_ATTN_EXT, "
                "MAP_CUSTOM3), with no crash. Not a ggml-cann finding; the "
                "simulator is suspected (a race or memory pressure in the embedded simulator, not "
                "yet found). They show a blind spot of the CI's classifier: a process killed by a "
                "signal prints neither `FAIL` nor an assert, so its op keeps 🟡 or ✅.", "",
                "| replay | op | signal | case it died in | CI's rule on that log | rerun: OK / n.s. / FAIL |",
                "| --- | --- | --- | --- | --- | --- |", *rows, ""]
    if now:
        out += ["## Crashes by a signal in the runs above", "",
                f"{len(now)} processes of the runs above died by a signal, not by an abort (the CI's "
                "rule column reads the op's first process):", "",
                "| replay | op | signal | case it died in | CI's rule | OK / n.s. / FAIL |",
                "| --- | --- | --- | --- | --- | --- |", *now, ""]
    return out


def convert(path: pathlib.Path) -> None:
    """A results file of bench/tbo_ops.py (ops tbo's predecessor: `ops[]` of `op`,
    `cases`, `deaths[{rc, case, stderr}]`) rewritten once in ops' schema, as ops tbo would
    have written it: each death a FAIL whose reason is its story (death_story); the old
    file kept as FILE.tbo_ops. Its per-op seconds, added up, become FILE's .time.json."""
    from cannops.cases.versions import for_ggml
    from cannops.cli.engine import CaseResult, DeviceInfo, Run, __version__, binary_source, death_story
    old = json.loads(path.read_text())
    if "schema" in old:
        return    # ops' own already
    device, source = old.get("backend", "CANN0"), binary_source(old["binary"])
    soc = source.get("soc", "")
    run = Run(mode="test", version=__version__, catalog=for_ggml(source.get("ggml_version")), source=source,
              devices=[DeviceInfo(name=device, description=soc, soc=soc)])
    for o in sorted(old["ops"], key=lambda o: o["op"]):
        story = {}
        for d in o["deaths"]:
            rc = None if d["rc"] == "timeout" else d["rc"]
            why = death_story(rc, d["stderr"].splitlines(), 600.0 if rc is None else None)
            story[d["case"] or f"#{len(o['cases']) + 1}"] = why
        cases = dict(o["cases"])
        cases.update({k: FAIL for k in story if k not in cases})
        for params, status in cases.items():
            run.results.append(CaseResult(device=device, op=o["op"], params=params, status=status,
                                          reason=story.get(params, ""), index=len(run.results)))
    path.rename(path.with_name(path.name + ".tbo_ops"))
    run.write_json(str(path))
    (path.with_name(path.stem + ".time.json")).write_text(
        json.dumps({"seconds": round(sum(o["seconds"] for o in old["ops"])), "jobs": 1}) + "\n")
    print(f"replay: {path}: {len(run.results)} cases in ops' schema")


HEADER = """
# The Ascend CI's reports, replayed on the simulator

The two real 910B reports in `shared/reference/` (the Ascend CI's nightly, Ascend910B1)
replayed at the ggml they tested, on the simulated 910B (`make ggml-cann VARIANTS=910B
GGML_SRC=...`), op by op as the CI runs them. Regenerate with `make ascend-ci-replay
GGML_MIRROR=DIR`, DIR the git directory of a ggml-org/ggml clone (`bench/ascend_ci_replay.py`:
trees, build, run, doc; raw logs and results stay under `build/replay/`).

How the CI works (Ascend/Ascend-CI, `.github/workflows/llamacpp_test.yml` and
`script/classify_backend_ops.py`): it builds llama.cpp master with `-DGGML_CANN=on`, runs
`test-backend-ops test -o OP` once for each of 87 listed ops, and classifies each op's
whole console by substrings, case-insensitively: any `FAIL` → ❌; `OK` and `not supported`
→ 🟡; `OK` alone → ✅; `not supported` alone → ❓. Since test-backend-ops ends every
finished run with `OK` (and `2/2 backends passed`), an op with no supported case prints
both words and is 🟡, never ❓; an op with no case at all is ✅ (ADD1 in 0.9.5 has two);
an abort prints `GGML_ASSERT(...) failed` and is ❌.

The replays run the CI's 87 ops through `ops tbo` (`-j 2`; its results in ops' schema, its
`--log-dir` consoles, each process after a `$ COMMAND` line). The replay's columns: **CI's
rule** classifies the replay's first process of the op (what the CI's `OP.log` would hold)
with that rule; **cases** is ops' own rule over every case (`ops tbo` goes on after an
abort, each abort a FAIL): ✅ all OK, 🟡 some not supported, ❓ none supported, ❌ any FAIL.
A difference between the report and the replay (CI's rule) is judged in the last column.
"""

FOOTER = """
## How the trees were chosen

ggml-org/ggml syncs llama.cpp's ggml changes as single commits that carry the llama.cpp
PR number (`(llama/NNNNN)`). Report a's OUT_PROD log aborts in `ggml_cann_ssm_conv` at
`aclnn_ops.cpp:3723`: the fall-through of the missing `break` after `case
GGML_OP_OUT_PROD:` that came with llama.cpp #17737 (ggml cc18d0fd) and went with #17512
(ggml 34e1e6cd); ggml ebc3a0f4 (the v0.9.5 bump right after the 2025-12-31 sync) lies
between them and has the assert on that very line. Report b has GATED_LINEAR_ATTN ✅, which
came with #18653 (ggml aab6aace, 2026-01-16); a82d61d2 is the last synced llama.cpp
commit of 2026-01-25. No ggml-cann or test-backend-ops change lies between ebc3a0f4 and
the next CANN commit (#17512), so report a's exact nightly (2025-12-29) tested the same
ggml-cann and test cases; for b, the CANN commits after #18653 (#18796, #18625, both
2026-01-16) are inside the replayed tree.
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("step", choices=("trees", "build", "run", "doc", "convert"))
    ap.add_argument("targets", nargs="*", help=f"of {', '.join(TARGETS)} (default: all)")
    ap.add_argument("-j", "--jobs", type=int, default=2, help="run: ops side by side (ops tbo -j)")
    ap.add_argument("--ggml-git", metavar="DIR", help="trees: the git directory of a ggml-org/ggml "
                    "clone (default: $GGML_MIRROR)")
    args = ap.parse_args(argv)
    targets = args.targets or list(TARGETS)
    unknown = [t for t in targets if t not in TARGETS]
    if unknown:
        print(f"replay: unknown target {unknown[0]} (known: {', '.join(TARGETS)})", file=sys.stderr)
        return 2
    if args.step == "trees":
        missing = trees_missing()
        git_dir = ggml_git_dir(args.ggml_git)
        if missing and git_dir is None:
            print("replay: trees needs the git directory of a ggml-org/ggml clone: --ggml-git DIR "
                  "or GGML_MIRROR (none given, or not a folder)", file=sys.stderr)
            return 2
        if git_dir is not None:
            cmd_trees(missing, git_dir)
        return 0
    if args.step == "run":
        cmd_run(targets, args.jobs)
    elif args.step == "convert":   # once: the runs made before ops tbo, kept in build/replay/
        for t in targets:
            for path in (results_file(t), REPLAY / "crashed-first-run" / f"{t}.json"):
                if path.exists():
                    convert(path)
    else:
        {"build": cmd_build, "doc": cmd_doc}[args.step](targets)
    return 0


if __name__ == "__main__":
    sys.exit(main())
